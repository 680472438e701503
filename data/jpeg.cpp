#include "data/jpeg.h"

// jpeglib.h needs size_t and FILE declared before it.
#include <cstdio>
#include <csetjmp>
#include <cstddef>

#include <jerror.h>
#include <jpeglib.h>

#include "core/error.h"

namespace octet {
namespace {

// libjpeg reports a fatal error by calling error_exit, which must not return: it jumps back to
// decode_into's setjmp with the message.
struct ErrorManager {
  jpeg_error_mgr mgr;  // first, so libjpeg's cinfo->err points at the whole struct
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

ErrorManager& manager_of(j_common_ptr cinfo) { return *reinterpret_cast<ErrorManager*>(cinfo->err); }

[[noreturn]] void on_error(j_common_ptr cinfo) {
  ErrorManager& e = manager_of(cinfo);
  (*cinfo->err->format_message)(cinfo, e.message);
  std::longjmp(e.jump, 1);
}

// Warnings (level -1) and trace messages. A file that ends before its image does is an error, as
// in PIL; other warnings (a stray byte before a marker) leave a decodable image and are dropped
// rather than printed to stderr, as PIL does.
void on_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) on_error(cinfo);
}

void on_progress(j_common_ptr cinfo) {
  const auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number <= kMaxJpegScans) return;
  ErrorManager& e = manager_of(cinfo);
  std::snprintf(e.message, sizeof(e.message), "more than %d scans", kMaxJpegScans);
  std::longjmp(e.jump, 1);
}

// (a * b) / 255, rounded, for a, b in [0, 255] (as PIL's CMYK conversion computes it).
uint8_t mul_div_255(unsigned a, unsigned b) {
  const unsigned t = a * b + 128;
  return static_cast<uint8_t>(((t >> 8) + t) >> 8);
}

// CMYK (or YCCK, which libjpeg turns into CMYK) to RGB as PIL does: R = (255 - C)(255 - K) / 255.
// Adobe's files, nearly all CMYK JPEGs, store the four channels inverted.
void cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb, int64_t width, bool inverted) {
  for (int64_t x = 0; x < width; ++x) {
    const uint8_t* p = cmyk + 4 * x;
    const unsigned k = inverted ? 255u - p[3] : p[3], white = 255u - k;
    for (int c = 0; c < 3; ++c) {
      const unsigned v = inverted ? 255u - p[c] : p[c];
      rgb[3 * x + c] = static_cast<uint8_t>(white - mul_div_255(v, white));
    }
  }
}

// The decode, from setjmp on. An error longjmps back here and it returns false with the message
// in `err`. C++ allows that jump only over frames without destructors to run: libjpeg's, and this
// one, which creates no object with a destructor (the buffers are the caller's). `check_size` may
// throw, from this frame, after libjpeg has returned.
bool decode_into(jpeg_decompress_struct& cinfo, ErrorManager& err, const std::vector<uint8_t>& bytes,
                 const std::function<void(int64_t, int64_t)>& check_size, Rgb8Image& out,
                 std::vector<uint8_t>& row) {
  if (setjmp(err.jump) != 0) return false;
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  check_size(cinfo.image_height, cinfo.image_width);
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  cinfo.dct_method = JDCT_ISLOW;  // PIL's defaults, and libjpeg's
  cinfo.do_fancy_upsampling = TRUE;
  jpeg_start_decompress(&cinfo);
  out.height = cinfo.output_height;
  out.width = cinfo.output_width;
  out.pixels.resize(static_cast<size_t>(out.height * out.width * 3));
  if (cmyk) row.resize(static_cast<size_t>(out.width * 4));
  while (cinfo.output_scanline < cinfo.output_height) {
    uint8_t* dst = out.pixels.data() + static_cast<int64_t>(cinfo.output_scanline) * out.width * 3;
    JSAMPROW line = cmyk ? row.data() : dst;
    if (jpeg_read_scanlines(&cinfo, &line, 1) != 1) return false;  // not with a memory source
    if (cmyk) cmyk_to_rgb(row.data(), dst, out.width, cinfo.saw_Adobe_marker);
  }
  jpeg_finish_decompress(&cinfo);
  return true;
}

}  // namespace

Rgb8Image decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& path,
                      const std::function<void(int64_t, int64_t)>& check_size) {
  ErrorManager err{};
  jpeg_decompress_struct cinfo{};
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_error;
  err.mgr.emit_message = on_message;
  std::snprintf(err.message, sizeof(err.message), "libjpeg stopped reading");
  jpeg_progress_mgr progress{};
  progress.progress_monitor = on_progress;
  Rgb8Image out;
  std::vector<uint8_t> row;
  if (setjmp(err.jump) != 0)  // jpeg_create_decompress fails only on memory
    OCTET_FAIL("image_folder: cannot decode ", path, ": ", err.message);
  jpeg_create_decompress(&cinfo);
  cinfo.progress = &progress;
  struct Destroy {
    jpeg_decompress_struct* c;
    ~Destroy() { jpeg_destroy_decompress(c); }
  } destroy{&cinfo};
  if (!decode_into(cinfo, err, bytes, check_size, out, row))
    OCTET_FAIL("image_folder: cannot decode ", path, ": ", err.message, " (corrupt or truncated JPEG)");
  return out;
}

}  // namespace octet
