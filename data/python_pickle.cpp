#include "data/python_pickle.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {
namespace {

using Kind = PickleValue::Kind;
using MutableRef = std::shared_ptr<PickleValue>;

// What one value costs in memory beyond its text and items: the struct and make_shared's
// control block.
constexpr uint64_t kValueBytes = sizeof(PickleValue) + 16;

// Moves the values `value` holds into `out`, leaving it holding none.
void ReleaseHeld(PickleValue& value, std::vector<PickleRef>& out) {
  for (PickleRef& item : value.items) out.push_back(std::move(item));
  for (auto& [key, item] : value.entries) {
    out.push_back(std::move(key));
    out.push_back(std::move(item));
  }
  for (PickleRef* ref : {&value.callable, &value.constructed, &value.state}) {
    if (*ref) out.push_back(std::move(*ref));
  }
  value.items.clear();
  value.entries.clear();
}

// UTF-8 text whose code points are all below 256, as the bytes they stand for (latin-1).
bool Latin1Bytes(const std::string& utf8, std::string& bytes) {
  bytes.clear();
  for (size_t i = 0; i < utf8.size(); ++i) {
    const auto c = static_cast<unsigned char>(utf8[i]);
    if (c < 0x80) {
      bytes.push_back(static_cast<char>(c));
    } else if ((c == 0xC2 || c == 0xC3) && i + 1 < utf8.size()) {
      bytes.push_back(static_cast<char>(((c & 0x03) << 6) | (static_cast<unsigned char>(utf8[++i]) & 0x3F)));
    } else {
      return false;
    }
  }
  return true;
}

class Machine {
 public:
  Machine(const std::string& bytes, const std::string& source)
      : bytes_(bytes), source_(source), budget_(kPickleBuiltBytesSlack + kPickleBuiltBytesPerByte * bytes.size()) {}

  PickleRef Run() {
    while (true) {
      if (position_ >= bytes_.size()) Fail("the pickle ends before its STOP opcode (truncated file)");
      opcode_offset_ = position_;
      const auto opcode = static_cast<unsigned char>(bytes_[position_++]);
      if (opcode == '.') break;  // STOP
      Execute(opcode);
    }
    if (stack_.size() != 1 || !marks_.empty()) Fail("the pickle leaves other than one value when it stops");
    return stack_.back();
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw BadInputError(fmt::format("{}: not a readable Python pickle of data: {} (at byte {})", source_, what,
                                    opcode_offset_));
  }

  // Counts `bytes` more of what the pickle built against its budget.
  void Charge(uint64_t bytes) {
    if (bytes > budget_ - built_) {
      Fail(fmt::format("the pickle builds more than {} bytes of values from {} bytes; a data pickle builds about "
                       "its own size", budget_, bytes_.size()));
    }
    built_ += bytes;
  }

  MutableRef New(Kind kind) {
    Charge(kValueBytes);
    auto value = std::make_shared<PickleValue>();
    value->kind = kind;
    return value;
  }

  PickleRef NewInt(Kind kind, int64_t integer) {
    MutableRef value = New(kind);
    value->integer = integer;
    return value;
  }

  PickleRef NewString(Kind kind, std::string text) {
    Charge(text.size());
    MutableRef value = New(kind);
    value->text = std::move(text);
    return value;
  }

  // Records that `holder` holds `held`: the depth bound, and `held` may no longer change.
  void Hold(PickleValue& holder, const PickleRef& held) {
    if (held->depth >= kMaxPickleDepth) {
      Fail(fmt::format("values nest more than {} deep; data pickles nest a few levels", kMaxPickleDepth));
    }
    holder.depth = std::max(holder.depth, held->depth + 1);
    const_cast<PickleValue&>(*held).held = true;
  }

  uint64_t Unsigned(size_t width) {
    if (bytes_.size() - position_ < width) Fail("the pickle ends inside an opcode's argument (truncated file)");
    uint64_t value = 0;
    for (size_t i = 0; i < width; ++i) value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes_[position_ + i])) << (8 * i);
    position_ += width;
    return value;
  }

  std::string Take(uint64_t length) {
    if (bytes_.size() - position_ < length) Fail(fmt::format("a {}-byte string runs past the end (truncated file)", length));
    std::string taken = bytes_.substr(position_, length);
    position_ += length;
    return taken;
  }

  std::string Line() {
    const size_t end = bytes_.find('\n', position_);
    if (end == std::string::npos) Fail("a GLOBAL name has no end of line");
    std::string line = bytes_.substr(position_, end - position_);
    position_ = end + 1;
    return line;
  }

  PickleRef Pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) Fail("an opcode takes a value from an empty stack");
    PickleRef value = std::move(stack_.back());
    stack_.pop_back();
    return value;
  }

  // The values pushed since the last MARK, which is removed.
  std::vector<PickleRef> PopToMark() {
    if (marks_.empty()) Fail("an opcode needs a MARK that was never set");
    std::vector<PickleRef> values(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return values;
  }

  // The container on top of the stack, to fill in place: the memo may hold it too, as Python's
  // unpickler allows. One that another value holds is refused, so no value ever holds itself.
  PickleValue& Top(Kind kind, const char* opcode) {
    if (stack_.empty() || stack_.back()->kind != kind) Fail(fmt::format("{} applies to a value of another kind", opcode));
    auto& container = const_cast<PickleValue&>(*stack_.back());
    if (container.held) Fail(fmt::format("{} changes a container that another value already holds", opcode));
    return container;
  }

  void Tuple(std::vector<PickleRef> items) {
    Charge(items.size() * sizeof(PickleRef));
    MutableRef tuple = New(Kind::kTuple);
    for (const PickleRef& item : items) Hold(*tuple, item);
    tuple->items = std::move(items);
    stack_.push_back(std::move(tuple));
  }

  void SetItems(std::vector<PickleRef> pairs) {
    if (pairs.size() % 2 != 0) Fail("SETITEMS has a key without a value");
    PickleValue& dict = Top(Kind::kDict, "SETITEMS");
    Charge(pairs.size() * sizeof(PickleRef));
    for (size_t i = 0; i < pairs.size(); i += 2) {
      Hold(dict, pairs[i]);
      Hold(dict, pairs[i + 1]);
      if (dict.held) Fail("SETITEMS puts a dict inside itself");
      dict.entries.emplace_back(std::move(pairs[i]), std::move(pairs[i + 1]));
    }
  }

  void Append(std::vector<PickleRef> items) {
    PickleValue& list = Top(Kind::kList, "APPENDS");
    Charge(items.size() * sizeof(PickleRef));
    for (const PickleRef& item : items) Hold(list, item);
    if (list.held) Fail("APPENDS puts a list inside itself");
    list.items.insert(list.items.end(), std::make_move_iterator(items.begin()), std::make_move_iterator(items.end()));
  }

  void Memo(uint64_t index) {
    if (stack_.empty()) Fail("PUT with an empty stack");
    memo_[index] = stack_.back();
  }

  void Get(uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) Fail(fmt::format("GET of memo entry {}, which was never PUT", index));
    stack_.push_back(it->second);
  }

  // A call of a global, recorded; the two that data pickles depend on are evaluated.
  void Call(PickleRef callable, PickleRef arguments) {
    if (callable->kind != Kind::kGlobal || arguments->kind != Kind::kTuple) Fail("REDUCE of something other than a global and a tuple");
    std::string bytes;
    if (callable->text == "_codecs.encode" && arguments->items.size() == 2 && arguments->items[0]->kind == Kind::kText &&
        Latin1Bytes(arguments->items[0]->text, bytes)) {
      stack_.push_back(NewString(Kind::kBytes, std::move(bytes)));
      return;
    }
    Charge(arguments->items.size() * sizeof(PickleRef));
    MutableRef call = New(Kind::kCall);
    Hold(*call, callable);
    for (const PickleRef& argument : arguments->items) Hold(*call, argument);
    call->callable = std::move(callable);
    call->items = arguments->items;
    stack_.push_back(std::move(call));
  }

  void Execute(unsigned char opcode) {
    switch (opcode) {
      case 0x80: Unsigned(1); break;                      // PROTO
      case 0x95: Unsigned(8); break;                      // FRAME: a hint only
      case '(': marks_.push_back(stack_.size()); break;   // MARK
      case ')': Tuple({}); break;                         // EMPTY_TUPLE
      case 0x85: { auto a = Pop(); Tuple({a}); break; }   // TUPLE1
      case 0x86: { auto b = Pop(), a = Pop(); Tuple({a, b}); break; }
      case 0x87: { auto c = Pop(), b = Pop(), a = Pop(); Tuple({a, b, c}); break; }
      case 't': Tuple(PopToMark()); break;                // TUPLE
      case ']': stack_.push_back(New(Kind::kList)); break;
      case 'l': { auto items = PopToMark(); stack_.push_back(New(Kind::kList)); Append(std::move(items)); break; }
      case 'a': { auto item = Pop(); Append({item}); break; }
      case 'e': Append(PopToMark()); break;
      case '}': stack_.push_back(New(Kind::kDict)); break;
      case 'd': { auto pairs = PopToMark(); stack_.push_back(New(Kind::kDict)); SetItems(std::move(pairs)); break; }
      case 's': { auto value = Pop(), key = Pop(); SetItems({key, value}); break; }
      case 'u': SetItems(PopToMark()); break;
      case 'N': stack_.push_back(New(Kind::kNone)); break;
      case 0x88: stack_.push_back(NewInt(Kind::kBool, 1)); break;
      case 0x89: stack_.push_back(NewInt(Kind::kBool, 0)); break;
      case 'K': stack_.push_back(NewInt(Kind::kInt, static_cast<int64_t>(Unsigned(1)))); break;
      case 'M': stack_.push_back(NewInt(Kind::kInt, static_cast<int64_t>(Unsigned(2)))); break;
      case 'J': stack_.push_back(NewInt(Kind::kInt, static_cast<int32_t>(Unsigned(4)))); break;
      case 0x8a: {  // LONG1: little-endian two's complement of n bytes
        const uint64_t length = Unsigned(1);
        if (length > 8) Fail("an integer wider than 64 bits");
        uint64_t value = length == 0 ? 0 : Unsigned(length);
        if (length > 0 && length < 8 && (value >> (8 * length - 1)) != 0) value |= ~uint64_t{0} << (8 * length);
        stack_.push_back(NewInt(Kind::kInt, static_cast<int64_t>(value)));
        break;
      }
      case 'G': {  // BINFLOAT: big-endian IEEE double
        uint64_t bits = 0;
        for (const char byte : Take(8)) bits = (bits << 8) | static_cast<unsigned char>(byte);
        MutableRef value = New(Kind::kFloat);
        std::memcpy(&value->real, &bits, sizeof(bits));
        stack_.push_back(value);
        break;
      }
      // Python 2's str is bytes (what pickle.load(..., encoding='bytes') gives).
      case 'U': stack_.push_back(NewString(Kind::kBytes, Take(Unsigned(1)))); break;
      case 'T': stack_.push_back(NewString(Kind::kBytes, Take(Unsigned(4)))); break;
      case 'C': stack_.push_back(NewString(Kind::kBytes, Take(Unsigned(1)))); break;
      case 'B': stack_.push_back(NewString(Kind::kBytes, Take(Unsigned(4)))); break;
      case 0x8e: stack_.push_back(NewString(Kind::kBytes, Take(Unsigned(8)))); break;
      case 0x96: stack_.push_back(NewString(Kind::kBytes, Take(Unsigned(8)))); break;  // BYTEARRAY8 (numpy, protocol 5)
      case 0x8c: stack_.push_back(NewString(Kind::kText, Take(Unsigned(1)))); break;
      case 'X': stack_.push_back(NewString(Kind::kText, Take(Unsigned(4)))); break;
      case 0x8d: stack_.push_back(NewString(Kind::kText, Take(Unsigned(8)))); break;
      case 'q': Memo(Unsigned(1)); break;   // BINPUT
      case 'r': Memo(Unsigned(4)); break;   // LONG_BINPUT
      case 0x94: Memo(memo_.size()); break; // MEMOIZE
      case 'h': Get(Unsigned(1)); break;    // BINGET
      case 'j': Get(Unsigned(4)); break;    // LONG_BINGET
      case 'c': {                           // GLOBAL module\nname\n
        std::string module = Line();
        stack_.push_back(NewString(Kind::kGlobal, module + "." + Line()));  // charged: copies of the file
        break;
      }
      case 0x93: {                          // STACK_GLOBAL
        auto name = Pop(), module = Pop();
        if (name->kind != Kind::kText || module->kind != Kind::kText) Fail("STACK_GLOBAL of names that are not text");
        stack_.push_back(NewString(Kind::kGlobal, module->text + "." + name->text));
        break;
      }
      case 'R': { auto arguments = Pop(), callable = Pop(); Call(callable, arguments); break; }      // REDUCE
      case 0x81: { auto arguments = Pop(), callable = Pop(); Call(callable, arguments); break; }     // NEWOBJ
      case 'b': {                           // BUILD
        auto state = Pop(), object = Pop();
        MutableRef built = New(Kind::kObject);
        Hold(*built, object);
        Hold(*built, state);
        built->constructed = std::move(object);
        built->state = std::move(state);
        stack_.push_back(built);
        break;
      }
      default:
        Fail(fmt::format("opcode 0x{:02x} ('{}') is not one that data pickles use", opcode,
                         opcode >= 0x20 && opcode < 0x7f ? std::string(1, static_cast<char>(opcode)) : "?"));
    }
  }

  const std::string& bytes_;
  const std::string& source_;
  size_t position_ = 0;
  size_t opcode_offset_ = 0;
  const uint64_t budget_;  // bytes the values built may take
  uint64_t built_ = 0;
  std::vector<PickleRef> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, PickleRef> memo_;
};

bool IsGlobalCall(const PickleRef& value, std::initializer_list<const char*> names) {
  if (!value || value->kind != Kind::kCall) return false;
  for (const char* name : names) {
    if (value->callable->text == name) return true;
  }
  return false;
}

}  // namespace

PickleValue::~PickleValue() {
  std::vector<PickleRef> pending;
  ReleaseHeld(*this, pending);
  while (!pending.empty()) {
    PickleRef value = std::move(pending.back());
    pending.pop_back();
    // The last owner takes the value's own values first, so freeing it frees nothing else.
    if (value.use_count() == 1) ReleaseHeld(const_cast<PickleValue&>(*value), pending);
  }
}

PickleRef PickleValue::Find(const std::string& key) const {
  for (const auto& [k, v] : entries) {
    if ((k->kind == Kind::kText || k->kind == Kind::kBytes) && k->text == key) return v;
  }
  return nullptr;
}

PickleRef ReadPickle(const std::string& bytes, const std::string& source) { return Machine(bytes, source).Run(); }

PickledArray AsUint8Array(const PickleRef& value, const std::string& source, const std::string& what) {
  auto fail = [&](const std::string& why) {
    throw BadInputError(fmt::format("{}: {} is not a numpy uint8 array: {}", source, what, why));
  };
  // Protocols 0-4: numpy.core.multiarray._reconstruct(ndarray, (0,), b'b'), then BUILD with
  // (version, shape, dtype, is_fortran, raw bytes). Protocol 5: _frombuffer(raw bytes, dtype,
  // shape, order).
  PickleRef shape, dtype, data;
  bool fortran = false;
  if (value && value->kind == Kind::kObject &&
      IsGlobalCall(value->constructed, {"numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct"})) {
    const PickleRef& state = value->state;
    if (state->kind != Kind::kTuple || state->items.size() != 5) fail("its state is not (version, shape, dtype, fortran, data)");
    shape = state->items[1];
    dtype = state->items[2];
    fortran = (state->items[3]->kind == Kind::kBool || state->items[3]->kind == Kind::kInt) && state->items[3]->integer != 0;
    data = state->items[4];
  } else if (IsGlobalCall(value, {"numpy.core.numeric._frombuffer", "numpy._core.numeric._frombuffer"}) &&
             value->items.size() == 4) {
    data = value->items[0];
    dtype = value->items[1];
    shape = value->items[2];
    fortran = value->items[3]->text == "F";
  } else {
    fail("it was not pickled by numpy.ndarray");
  }
  const PickleRef dtype_call = dtype->kind == Kind::kObject ? dtype->constructed : dtype;
  if (!IsGlobalCall(dtype_call, {"numpy.dtype"}) || dtype_call->items.empty() ||
      (dtype_call->items[0]->text != "u1" && dtype_call->items[0]->text != "uint8")) {
    fail("its dtype is not uint8");
  }
  if (fortran) fail("it is in Fortran order");
  if (shape->kind != Kind::kTuple) fail("its shape is not a tuple");
  PickledArray array;
  int64_t elements = 1;
  for (const PickleRef& dimension : shape->items) {
    if (dimension->kind != Kind::kInt || dimension->integer < 0) fail("its shape holds something other than sizes");
    array.shape.push_back(dimension->integer);
    if (__builtin_mul_overflow(elements, dimension->integer, &elements)) fail("its shape holds more than 2^63 elements");
  }
  if (data->kind != Kind::kBytes) fail("its data are not bytes");
  if (static_cast<int64_t>(data->text.size()) != elements) {
    fail(fmt::format("its shape holds {} elements but its data {} bytes", elements, data->text.size()));
  }
  array.data = data->text;
  return array;
}

}  // namespace mgpu
