#include "ddp/slurm_nodelist.h"

#include <cctype>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {
namespace {

// Nine digits keep every number, and every count below, inside 64-bit arithmetic.
constexpr size_t kMaxDigits = 9;

bool IsSeparator(char c) { return c == ',' || std::isspace(static_cast<unsigned char>(c)); }

class NodelistParser {
 public:
  NodelistParser(const std::string& text, const std::string& variable) : text_(text), variable_(variable) {}

  std::vector<std::string> Parse() {
    while (pos_ < text_.size()) {
      if (IsSeparator(text_[pos_])) {
        ++pos_;
        continue;
      }
      ParseItem();
    }
    if (hosts_.empty()) Fail(text_.size(), "the list names no host");
    return std::move(hosts_);
  }

 private:
  [[noreturn]] void Fail(size_t at, const std::string& what) const {
    throw BadInputError(fmt::format("{}='{}' is not a Slurm node list: {} at character {}; it is normally set by "
                                    "Slurm (srun, sbatch): unset it or fix its value",
                                    variable_, text_, what, at + 1));
  }

  // One host expression: text and bracket groups up to the next separator outside brackets.
  void ParseItem() {
    std::vector<std::string> texts(1);
    std::vector<std::vector<std::string>> groups;
    while (pos_ < text_.size() && !IsSeparator(text_[pos_])) {
      const char c = text_[pos_];
      if (c == ']') Fail(pos_, "']' without a matching '['");
      if (c != '[') {
        texts.back() += c;
        ++pos_;
        continue;
      }
      groups.push_back(ParseGroup());
      texts.emplace_back();
    }
    if (!groups.empty() && !texts.back().empty()) {
      Fail(pos_ - texts.back().size(), "text after the last ']' ('" + texts.back() + "'), which Slurm rejects too");
    }
    size_t count = 1;
    for (const auto& numbers : groups) {
      count *= numbers.size();  // each factor is below kMaxSlurmNodelistHosts: no overflow before the check
      if (hosts_.size() + count > kMaxSlurmNodelistHosts) {
        Fail(pos_ - 1, fmt::format("more than {} hosts", kMaxSlurmNodelistHosts));
      }
    }
    Expand(texts, groups, 0, "");
  }

  // "[ranges]" at pos_: the numbers it names, formatted.
  std::vector<std::string> ParseGroup() {
    const size_t open = pos_++;
    std::vector<std::string> numbers;
    while (true) {
      const size_t start = pos_;
      const std::string low = Digits();
      if (low.empty()) Fail(start, "expected a number after '" + std::string(1, text_[start - 1]) + "'");
      std::string high = low;
      if (pos_ < text_.size() && text_[pos_] == '-') {
        ++pos_;
        const size_t high_at = pos_;
        high = Digits();
        if (high.empty()) Fail(high_at, "expected the end of the range " + low + "-");
        if (std::stoll(high) < std::stoll(low)) Fail(start, "the range " + low + "-" + high + " runs backwards");
      }
      const long long first = std::stoll(low), last = std::stoll(high);
      if (static_cast<size_t>(last - first) + numbers.size() >= kMaxSlurmNodelistHosts) {
        Fail(start, fmt::format("more than {} hosts", kMaxSlurmNodelistHosts));
      }
      for (long long n = first; n <= last; ++n) numbers.push_back(fmt::format("{:0{}}", n, low.size()));
      if (pos_ >= text_.size()) Fail(open, "'[' without a matching ']'");
      if (text_[pos_] == ']') break;
      if (text_[pos_] != ',') Fail(pos_, fmt::format("unexpected '{}' inside [...]", text_[pos_]));
      ++pos_;
    }
    ++pos_;  // the ']'
    return numbers;
  }

  std::string Digits() {
    const size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (pos_ - start > kMaxDigits) Fail(start, fmt::format("a number of more than {} digits", kMaxDigits));
    return text_.substr(start, pos_ - start);
  }

  // Every combination of the groups' numbers, the first group varying slowest.
  void Expand(const std::vector<std::string>& texts, const std::vector<std::vector<std::string>>& groups, size_t group,
              const std::string& prefix) {
    if (group == groups.size()) {
      hosts_.push_back(prefix + texts[group]);
      return;
    }
    for (const std::string& number : groups[group]) Expand(texts, groups, group + 1, prefix + texts[group] + number);
  }

  const std::string& text_;
  const std::string& variable_;
  size_t pos_ = 0;
  std::vector<std::string> hosts_;
};

}  // namespace

std::vector<std::string> ExpandSlurmNodelist(const std::string& nodelist, const std::string& variable) {
  return NodelistParser(nodelist, variable).Parse();
}

}  // namespace mgpu
