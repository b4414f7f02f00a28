#include "data/image_codec.h"

// jpeglib.h needs FILE and size_t declared first.
#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {
namespace {

// libjpeg reports errors through a callback that must not return: it longjmps back to
// DecodeJpeg with the message saved. Warnings that mean missing data do the same; others
// (e.g. extraneous bytes before a marker) are ignored, as PIL does.
struct JpegErrorManager {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void JpegErrorExit(j_common_ptr info) {
  auto* manager = reinterpret_cast<JpegErrorManager*>(info->err);
  manager->base.format_message(info, manager->message);
  std::longjmp(manager->jump, 1);
}

void JpegEmitMessage(j_common_ptr info, int level) {
  const int code = info->err->msg_code;
  if (level < 0 && (code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER)) JpegErrorExit(info);
}

// Returns an empty string on success, else libjpeg's message. Only trivially destructible
// objects live between setjmp and a longjmp.
std::string DecodeJpeg(const std::vector<uint8_t>& bytes, DecodedImage& image) {
  jpeg_decompress_struct info;
  JpegErrorManager errors;
  info.err = jpeg_std_error(&errors.base);
  errors.base.error_exit = JpegErrorExit;
  errors.base.emit_message = JpegEmitMessage;
  errors.message[0] = '\0';
  if (setjmp(errors.jump) != 0) {
    jpeg_destroy_decompress(&info);
    return errors.message;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&info, TRUE);
  info.out_color_space = JCS_RGB;  // libjpeg converts YCbCr and grayscale; CMYK fails here
  jpeg_start_decompress(&info);
  image.height = info.output_height;
  image.width = info.output_width;
  image.rgb.resize(static_cast<size_t>(image.height * image.width * 3));
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = image.rgb.data() + static_cast<size_t>(info.output_scanline) * image.width * 3;
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return "";
}

// libpng's simplified API converts every PNG flavour to 8-bit RGB and handles its own errors.
std::string DecodePng(const std::vector<uint8_t>& bytes, DecodedImage& image) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size())) return png.message;
  png.format = PNG_FORMAT_RGB;
  image.height = png.height;
  image.width = png.width;
  image.rgb.resize(PNG_IMAGE_SIZE(png));
  if (!png_image_finish_read(&png, nullptr, image.rgb.data(), 0, nullptr)) {
    const std::string message = png.message;
    png_image_free(&png);
    return message;
  }
  return "";
}

}  // namespace

DecodedImage DecodeImageFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BadInputError(fmt::format("{}: cannot open the image: {}", path, std::strerror(errno)));
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  DecodedImage image;
  std::string error;
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) {
    error = DecodeJpeg(bytes, image);
  } else if (bytes.size() >= 8 && png_sig_cmp(bytes.data(), 0, 8) == 0) {
    error = DecodePng(bytes, image);
  } else {
    throw BadInputError(fmt::format("{}: not a JPEG or PNG image ({} bytes, unknown signature)",
                                    path, bytes.size()));
  }
  if (!error.empty()) throw BadInputError(fmt::format("{}: cannot decode the image: {}", path, error));
  if (image.height == 0 || image.width == 0) {
    throw BadInputError(fmt::format("{}: the image is empty (0 pixels)", path));
  }
  return image;
}

}  // namespace mgpu
