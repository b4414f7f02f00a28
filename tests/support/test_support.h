// Helpers shared by mgpu's tests: temporary folders, fixture files, running the binaries.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/status.h"

namespace mgpu::testing {

// Runs `fn`, expects it to throw BadInputError, and returns the message (a test failure if not).
template <typename Fn>
std::string BadInputMessage(Fn fn) {
  try {
    fn();
  } catch (const BadInputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected BadInputError";
  return "";
}

// A fresh folder under the system temp dir, removed when the object goes out of scope.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void WriteBytes(const std::string& path, const std::string& bytes);
void WriteGzip(const std::string& path, const std::string& bytes);

// An IDX file body: magic 00 00 08 <rank>, big-endian dims, then the data bytes.
std::string IdxBytes(const std::vector<int64_t>& dims, const std::string& data);

// Writes a small MNIST-like data set (train/t10k images and labels, gzip) into `folder`:
// `train` and `test` samples of size×size pixels whose class is readable from the image.
void WriteTinyMnistLike(const std::string& folder, int train, int test, int size = 28);

// How far apart float32 rounding alone may put the parameters of two runs of the same training
// that add the same terms in another order: one process against two DDP ranks or two DP replicas
// (each rank sums its share of the batch, then the shares are added), or LibTorch's AVX-512
// kernels against its AVX2 ones (other SIMD widths, other blocking). `steps` optimizer steps; a
// gradient entry is a sum of at most `longest_sum` float32 terms (a convolution's weight gradient
// sums over the batch and every output position). Relative to the parameters' scale.
//   - u = 2^-24 is float32's unit roundoff. ATen sums in blocks combined pairwise, so a sum of n
//     terms is off by at most about ceil(log2 n) * u, relative to the sum of the terms'
//     magnitudes; another order of the same terms has its own such error: two computations of
//     a gradient differ by up to 2 * ceil(log2 n) * u.
//   - SGD moves a parameter by lr times its (momentum) gradient: each step's difference enters the
//     parameter once and momentum carries it on, so after `steps` steps the differences add up
//     to at most `steps` times one step's.
//   - The training also feeds a difference back (other parameters give other gradients), which
//     the count above leaves out; the bound lets that feedback grow it tenfold. A wrong reduction
//     (a gradient averaged over the wrong count, a bucket left out) is off by 1e-2 or more, still
//     far above the bound for the short runs of these tests.
double Float32ReorderingTolerance(int64_t steps, int64_t longest_sum);

struct CommandResult {
  int exit_code = -1;   // the process's exit status, or 128 + signal
  std::string output;   // stdout and stderr together
};

// Runs `argv` with the given extra environment ("NAME=value"), capturing its output.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::vector<std::string>& extra_env = {});

// Where a BackgroundCommand runs: in this test's process group (that of ctest and whatever
// started it), or in one of its own. A test that stops the command (SIGSTOP) must use its own:
// should the harness's group lose its last parent outside it (its shell exits) while a member is
// stopped, the kernel sends SIGHUP to the whole group, ctest and this test included.
enum class ProcessGroup { kInherited, kOwn };

// A command running in the background; Wait() collects its exit code and output.
class BackgroundCommand {
 public:
  BackgroundCommand(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {},
                    ProcessGroup group = ProcessGroup::kInherited);
  ~BackgroundCommand();  // kills the process if Wait() was not called
  BackgroundCommand(const BackgroundCommand&) = delete;
  BackgroundCommand& operator=(const BackgroundCommand&) = delete;
  CommandResult Wait();
  // As Wait(), for at most `seconds`: then the process is killed (SIGKILL), its exit code is
  // 128 + 9 and its output what it wrote until then, so that a test of a hang fails saying what
  // the process printed instead of waiting forever. Output that a process it left behind keeps
  // open is read for at most 5 s after the process ended.
  CommandResult WaitAtMost(double seconds);

 private:
  int pid_ = -1;
  int output_fd_ = -1;
};

std::string ReadText(const std::string& path);
// Lines in the file at `path`; 0 when it does not exist (yet).
int LineCount(const std::string& path);

// Non-overlapping occurrences of `needle` in `text`.
size_t Count(const std::string& text, const std::string& needle);
// The <section id="..."> ... </section> of one chart or table of a report.html ("" if absent).
std::string SectionOf(const std::string& html, const std::string& id);

// Polls `condition` every 50 ms for up to `seconds`; returns whether it became true.
bool WaitFor(const std::function<bool()>& condition, double seconds);

// A TCP port on 127.0.0.1 that was free a moment ago (for rendezvous in tests).
int FreeLocalPort();

// torchrun's environment for one of `world_size` ranks on this host, meeting at 127.0.0.1:port
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), for BackgroundCommand.
std::vector<std::string> TorchrunEnvironment(int rank, int world_size, int port);

}  // namespace mgpu::testing
