#include "data/jpeg_header.h"

#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE

#include <jpeglib.h>

namespace mgpu {
namespace {

// libjpeg's error_exit must not return: it longjmps back to ReadJpegHeader with the message kept.
struct HeaderErrors {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void HeaderErrorExit(j_common_ptr info) {
  auto* errors = reinterpret_cast<HeaderErrors*>(info->err);
  errors->base.format_message(info, errors->message);
  std::longjmp(errors->jump, 1);
}

void IgnoreMessage(j_common_ptr, int) {}

}  // namespace

JpegHeader ReadJpegHeader(const uint8_t* bytes, size_t size) {
  JpegHeader header;
  if (size < 3 || bytes[0] != 0xFF || bytes[1] != 0xD8 || bytes[2] != 0xFF) return header;
  // Only trivially destructible objects live between setjmp and a longjmp.
  jpeg_decompress_struct info;
  HeaderErrors errors;
  info.err = jpeg_std_error(&errors.base);
  errors.base.error_exit = HeaderErrorExit;
  errors.base.emit_message = IgnoreMessage;
  errors.message[0] = '\0';
  if (setjmp(errors.jump) != 0) {
    jpeg_destroy_decompress(&info);
    header.error = errors.message;
    return header;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, bytes, static_cast<unsigned long>(size));
  jpeg_read_header(&info, TRUE);
  header.is_jpeg = true;
  header.size = ImageSize{info.image_height, info.image_width};
  header.components = info.num_components;
  header.progressive = info.progressive_mode != 0;
  header.cmyk = info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK;
  header.luma_h_sampling = info.comp_info[0].h_samp_factor;
  header.luma_v_sampling = info.comp_info[0].v_samp_factor;
  header.max_h_sampling = info.max_h_samp_factor;
  header.max_v_sampling = info.max_v_samp_factor;
  jpeg_destroy_decompress(&info);
  return header;
}

GpuDecodeRoute RouteForGpu(const JpegHeader& header) {
  if (!header.is_jpeg) return header.error.empty() ? GpuDecodeRoute::kNotJpeg : GpuDecodeRoute::kBadHeader;
  if (header.size.height < 1 || header.size.width < 1) return GpuDecodeRoute::kBadHeader;
  if (header.progressive) return GpuDecodeRoute::kProgressive;
  if (header.cmyk || header.components == 4) return GpuDecodeRoute::kCmyk;
  if (header.components != 1 && header.components != 3) return GpuDecodeRoute::kUnusualSampling;
  // 4:4:4, 4:2:2, 4:4:0 and 4:2:0 (luma at 1 or 2 per direction, chroma at 1); 4:1:1 and 4:1:0
  // subsample by 4, which the hardware engine refuses.
  if (header.max_h_sampling > 2 || header.max_v_sampling > 2) return GpuDecodeRoute::kUnusualSampling;
  if (header.components == 3 &&
      (header.luma_h_sampling != header.max_h_sampling || header.luma_v_sampling != header.max_v_sampling)) {
    return GpuDecodeRoute::kUnusualSampling;  // chroma sampled more finely than luma
  }
  if (header.size.height * header.size.width > kMaxGpuPixels) return GpuDecodeRoute::kTooLarge;
  return GpuDecodeRoute::kGpu;
}

const char* RouteName(GpuDecodeRoute route) {
  switch (route) {
    case GpuDecodeRoute::kGpu: return "gpu";
    case GpuDecodeRoute::kNotJpeg: return "not_jpeg";
    case GpuDecodeRoute::kBadHeader: return "bad_header";
    case GpuDecodeRoute::kProgressive: return "progressive";
    case GpuDecodeRoute::kCmyk: return "cmyk";
    case GpuDecodeRoute::kUnusualSampling: return "unusual_sampling";
    case GpuDecodeRoute::kTooLarge: return "too_large";
  }
  return "unknown";
}

}  // namespace mgpu
