#include "data/image_codec.h"

// jpeglib.h needs FILE and size_t declared first.
#include <algorithm>
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
#include "data/out_of_memory.h"
#include "data/regular_file.h"

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

// Pillow's decompression-bomb check: an image of more pixels than this is refused before its
// pixels are allocated (Pillow warns above Image.MAX_IMAGE_PIXELS = 89,478,485 and refuses
// twice that). A few hundred bytes of JPEG or PNG can declare billions of pixels.
constexpr uint64_t kMaxImagePixels = 2 * uint64_t{89'478'485};

// "" when a width x height image is within kMaxImagePixels, else why not.
std::string CheckPixelCount(uint64_t width, uint64_t height) {
  if (width * height <= kMaxImagePixels) return "";
  return fmt::format("its header declares {}x{} = {} pixels, more than the {} an image may have (Pillow's "
                     "decompression-bomb limit); the file is corrupt or a decompression bomb, or shrink the image",
                     width, height, width * height, kMaxImagePixels);
}

// libjpeg's text for JERR_BAD_LIB_VERSION, which no image can cause: the program was compiled
// against one libjpeg's headers and runs with another's library.
constexpr char kJpegLibraryMismatch[] = "Wrong JPEG library version";

void JpegErrorExit(j_common_ptr info) {
  auto* manager = reinterpret_cast<JpegErrorManager*>(info->err);
  manager->base.format_message(info, manager->message);
  std::longjmp(manager->jump, 1);
}

void JpegEmitMessage(j_common_ptr info, int level) {
  const int code = info->err->msg_code;
  if (level < 0 && (code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER)) JpegErrorExit(info);
}

// Routes `info`'s errors to `errors`: libjpeg's message is kept and error_exit longjmps to
// errors.jump, which the caller sets with setjmp (in its own frame) before any other libjpeg call.
void RouteErrors(jpeg_decompress_struct& info, JpegErrorManager& errors) {
  info.err = jpeg_std_error(&errors.base);
  errors.base.error_exit = JpegErrorExit;
  errors.base.emit_message = JpegEmitMessage;
  errors.message[0] = '\0';
}

[[noreturn]] void ThrowDecodeError(const std::string& name, const std::string& error) {
  if (error.rfind(kJpegLibraryMismatch, 0) == 0) {
    throw Error(ExitCode::kFailure,
                fmt::format("cannot decode {}: {}. This build of mgpu mixes one libjpeg's headers with another's "
                            "library (check which jconfig.h the compiler saw and which libjpeg.so `ldd` shows); "
                            "rebuild against one libjpeg", name, error));
  }
  throw BadInputError(fmt::format("{}: cannot decode the image: {}", name, error));
}

// Reads a JPEG's header with libjpeg's errors routed here and refuses images over the pixel
// limit, then runs `decode(info)`, which returns "" or why it gave up, and destroys the
// decompressor. Returns "" on success, else libjpeg's message or decode's. The setjmp lives in
// this frame: `decode` may call libjpeg freely, but holds only trivially destructible locals
// (a libjpeg error longjmps past its frame).
template <typename Decode>
std::string WithJpegHeader(const uint8_t* bytes, size_t size, Decode&& decode) {
  jpeg_decompress_struct info;
  JpegErrorManager errors;
  RouteErrors(info, errors);
  if (setjmp(errors.jump) != 0) {
    jpeg_destroy_decompress(&info);
    return errors.message;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, bytes, static_cast<unsigned long>(size));
  jpeg_read_header(&info, TRUE);
  info.out_color_space = JCS_RGB;  // libjpeg converts YCbCr and grayscale; CMYK fails here
  if (!CheckPixelCount(info.image_width, info.image_height).empty()) {  // no string outlives a libjpeg call here
    jpeg_destroy_decompress(&info);
    return CheckPixelCount(info.image_width, info.image_height);
  }
  std::string result = decode(info);
  jpeg_destroy_decompress(&info);
  return result;
}

std::string DecodeJpeg(const uint8_t* bytes, size_t size, DecodedImage& image) {
  return WithJpegHeader(bytes, size, [&image](jpeg_decompress_struct& info) {
    jpeg_start_decompress(&info);
    image.height = info.output_height;
    image.width = info.output_width;
    image.rgb.resize(static_cast<size_t>(image.height * image.width * 3));
    while (info.output_scanline < info.output_height) {
      JSAMPROW row = image.rgb.data() + static_cast<size_t>(info.output_scanline) * image.width * 3;
      jpeg_read_scanlines(&info, &row, 1);
    }
    jpeg_finish_decompress(&info);
    return std::string();
  });
}

// libpng's simplified API converts every PNG flavour to 8-bit RGB and handles its own errors.
std::string DecodePng(const uint8_t* bytes, size_t size, DecodedImage& image) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, bytes, size)) return png.message;
  if (std::string too_large = CheckPixelCount(png.width, png.height); !too_large.empty()) {
    png_image_free(&png);
    return too_large;
  }
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

// The smallest m of 1, 2, 4, 8 for which the window scaled by m/8 still covers `min_size`. Not
// the other eighths: libjpeg-turbo has SIMD IDCTs for 8/8 and the 4, 2 and 1-point reductions
// only, and at 3/8, 5/8, 6/8 or 7/8 the plain-C IDCTs (with 2m points for 4:2:0 chroma) cost more
// than the larger decode saves (2-core VM, 2026-11-26: 1,898-1,921 -> 2,070-2,079 img/s at 0
// workers, 3,517 -> 3,870 at 2). Photos of 256-500 px under RandomResizedCrop(224) then decode at
// full scale, as torchvision and nvJPEG do.
int DctScale(const Window& window, ImageSize min_size) {
  for (int m = 1; m < 8; m *= 2) {
    if (window.width * m >= min_size.width * 8 && window.height * m >= min_size.height * 8) return m;
  }
  return 8;
}

// A coordinate of the full image in a dimension scaled from `full` to `scaled` pixels.
int64_t Scaled(int64_t x, int64_t full, int64_t scaled) {
  return (2 * x * scaled + full) / (2 * full);  // rounded to nearest
}

// DecodeJpeg's region variant: the window `pick` chooses, at the smallest DCT scale that keeps
// it at least `min_size`. The rows below the window are never decoded (destroying the
// decompressor aborts the rest).
std::string DecodeJpegRegion(const uint8_t* bytes, size_t size, const std::function<Window(ImageSize)>& pick,
                             ImageSize min_size, DecodedRegion& region) {
  return WithJpegHeader(bytes, size, [&](jpeg_decompress_struct& info) {
    const ImageSize full{info.image_height, info.image_width};
    if (full.height == 0 || full.width == 0) return std::string("the image is empty (0 pixels)");
    const Window window = pick(full);
    info.scale_num = static_cast<unsigned int>(DctScale(window, min_size));
    info.scale_denom = 8;
    jpeg_start_decompress(&info);
    const int64_t out_h = info.output_height, out_w = info.output_width;
    // The window in the scaled image, at least one pixel each way.
    const int64_t y0 = std::min(Scaled(window.top, full.height, out_h), out_h - 1);
    const int64_t y1 = std::clamp(Scaled(window.top + window.height, full.height, out_h), y0 + 1, out_h);
    const int64_t x0 = std::min(Scaled(window.left, full.width, out_w), out_w - 1);
    const int64_t x1 = std::clamp(Scaled(window.left + window.width, full.width, out_w), x0 + 1, out_w);
    // libjpeg widens the columns to whole iMCUs; output_width becomes the decoded width.
    JDIMENSION crop_x = static_cast<JDIMENSION>(x0), crop_w = static_cast<JDIMENSION>(x1 - x0);
    jpeg_crop_scanline(&info, &crop_x, &crop_w);
    if (y0 > 0) jpeg_skip_scanlines(&info, static_cast<JDIMENSION>(y0));
    region.image.height = y1 - y0;
    region.image.width = info.output_width;
    region.image.rgb.resize(static_cast<size_t>(region.image.height * region.image.width * 3));
    for (int64_t y = 0; y < region.image.height; ++y) {
      JSAMPROW row = region.image.rgb.data() + static_cast<size_t>(y * region.image.width * 3);
      jpeg_read_scanlines(&info, &row, 1);
    }
    region.window = Window{0, x0 - static_cast<int64_t>(crop_x), y1 - y0, x1 - x0};
    return std::string();
  });
}

bool IsJpeg(const uint8_t* bytes, size_t size) {
  return size >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
}

bool IsPng(const uint8_t* bytes, size_t size) {
  return size >= 8 && png_sig_cmp(const_cast<uint8_t*>(bytes), 0, 8) == 0;
}

[[noreturn]] void ThrowUnknownFormat(const std::string& name, size_t size) {
  throw BadInputError(fmt::format("{}: not a JPEG or PNG image ({} bytes, unknown signature)", name, size));
}

DecodedImage DecodeWhole(const uint8_t* bytes, size_t size, const std::string& name) {
  DecodedImage image;
  std::string error;
  if (IsJpeg(bytes, size)) {
    error = DecodeJpeg(bytes, size, image);
  } else if (IsPng(bytes, size)) {
    error = DecodePng(bytes, size, image);
  } else {
    ThrowUnknownFormat(name, size);
  }
  if (!error.empty()) ThrowDecodeError(name, error);
  if (image.height == 0 || image.width == 0) {
    throw BadInputError(fmt::format("{}: the image is empty (0 pixels)", name));
  }
  return image;
}

DecodedRegion DecodeRegion(const uint8_t* bytes, size_t size, const std::string& name,
                           const std::function<Window(ImageSize)>& pick, ImageSize min_size) {
  DecodedRegion region;
  if (IsJpeg(bytes, size)) {
    const std::string error = DecodeJpegRegion(bytes, size, pick, min_size, region);
    if (!error.empty()) ThrowDecodeError(name, error);
    return region;
  }
  if (!IsPng(bytes, size)) ThrowUnknownFormat(name, size);
  region.image = DecodeWhole(bytes, size, name);
  region.window = pick(ImageSize{region.image.height, region.image.width});
  return region;
}

}  // namespace

DecodedImage DecodeImageFile(const std::string& path) {
  return NameFileOnOutOfMemory(path, [&] {
    if (const std::string why = WhyNotARegularFile(path); !why.empty()) {
      throw BadInputError(fmt::format("{}: {}; replace it with an image file or remove it", path, why));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) throw BadInputError(fmt::format("{}: cannot open the image: {}", path, std::strerror(errno)));
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return DecodeWhole(bytes.data(), bytes.size(), path);
  });
}

DecodedImage DecodeImageBytes(const uint8_t* bytes, size_t size, const std::string& name) {
  return NameFileOnOutOfMemory(name, [&] { return DecodeWhole(bytes, size, name); });
}

DecodedRegion DecodeImageRegion(const uint8_t* bytes, size_t size, const std::string& name,
                                const std::function<Window(ImageSize)>& pick, ImageSize min_size) {
  return NameFileOnOutOfMemory(name, [&] { return DecodeRegion(bytes, size, name, pick, min_size); });
}

}  // namespace mgpu
