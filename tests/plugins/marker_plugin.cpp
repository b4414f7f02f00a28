// A "plugin" whose library constructor writes the file named by MGPU_TEST_PLUGIN_MARKER, as the
// attack of issue 34 did: mgpu serve's tests check that a refused plugin's code never runs (no
// marker), and that an allowed one does (the marker appears).
#include <cstdio>
#include <cstdlib>

namespace {

__attribute__((constructor)) void WriteMarker() {
  const char* path = std::getenv("MGPU_TEST_PLUGIN_MARKER");
  if (path == nullptr) return;
  if (FILE* file = std::fopen(path, "w")) {
    std::fputs("the plugin's constructor ran\n", file);
    std::fclose(file);
  }
}

}  // namespace
