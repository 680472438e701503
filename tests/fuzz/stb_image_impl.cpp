// stb_image's decoders (octet reads PNGs with them) compiled into the image harness, instrumented,
// so libFuzzer sees their coverage (Debian's libstb.a is not instrumented); the harness's copy is
// linked instead of it.
#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>
