// Reads Python pickles of plain data, such as CIFAR-10's Python release (a dict of bytes keys to
// a numpy uint8 array and lists of ints), without running any of their code.
//
// A pickle is a small stack program. This reader runs the opcodes that data pickles use
// (protocols 0-5 binary forms: containers, numbers, strings, bytes, memo, GLOBAL, REDUCE, BUILD,
// NEWOBJ) and turns a call of a global (REDUCE) or a state update (BUILD) into a value that
// records it, without calling anything; two calls are evaluated because data pickles need them:
// `_codecs.encode(text, 'latin1')` (how Python 3 writes bytes at protocol 2) becomes the bytes,
// and a numpy array (numpy 1 or 2: `_reconstruct` then BUILD, or protocol 5's `_frombuffer`) is
// readable with AsUint8Array. Any other opcode, or damaged data, is a BadInputError naming the
// source, the opcode and its offset.
//
// Hostile pickles are bounded: values nest at most kMaxPickleDepth deep, the values and bytes a
// pickle builds may take at most kPickleBuiltBytesPerByte times its size plus
// kPickleBuiltBytesSlack (memo references let a few bytes copy a large value), a container may
// not change once another value holds it (so no value contains itself), and freeing a value
// never recurses.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mgpu {

inline constexpr int kMaxPickleDepth = 100;  // data pickles nest fewer than 10 deep
inline constexpr uint64_t kPickleBuiltBytesPerByte = 64;
inline constexpr uint64_t kPickleBuiltBytesSlack = uint64_t{64} << 20;

struct PickleValue;
using PickleRef = std::shared_ptr<const PickleValue>;

struct PickleValue {
  enum class Kind { kNone, kBool, kInt, kFloat, kText, kBytes, kList, kTuple, kDict, kGlobal, kCall, kObject };
  Kind kind = Kind::kNone;
  int64_t integer = 0;                  // kBool (0 or 1), kInt
  double real = 0;                      // kFloat
  std::string text;                     // kText (UTF-8), kBytes, kGlobal ("module.name")
  std::vector<PickleRef> items;         // kList, kTuple; kCall: the arguments
  std::vector<std::pair<PickleRef, PickleRef>> entries;  // kDict, in insertion order
  PickleRef callable;                   // kCall: the global called (a kGlobal)
  PickleRef constructed;                // kObject: what BUILD gave `state` to (usually a kCall)
  PickleRef state;                      // kObject
  int depth = 1;                        // 1 + the depth of the deepest value held; 1 for none
  bool held = false;                    // whether another value holds this one

  PickleValue() = default;
  PickleValue(const PickleValue&) = delete;
  PickleValue& operator=(const PickleValue&) = delete;
  // Frees the values only this one holds with a loop, not recursion: a long chain of nested
  // values would otherwise overflow the stack.
  ~PickleValue();

  // The entry whose key is this text or these bytes (CIFAR's keys are bytes), or nullptr.
  PickleRef Find(const std::string& key) const;
};

// A numpy uint8 array read from a pickle: its shape and its bytes in C order.
struct PickledArray {
  std::vector<int64_t> shape;
  std::string data;
};

// Runs the pickle in `bytes`; `source` names it in errors (a file path). Throws BadInputError.
PickleRef ReadPickle(const std::string& bytes, const std::string& source);

// `value` as a C-ordered numpy uint8 array; BadInputError naming `source` and `what` otherwise.
PickledArray AsUint8Array(const PickleRef& value, const std::string& source, const std::string& what);

}  // namespace mgpu
