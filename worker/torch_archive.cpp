#include "worker/torch_archive.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <unordered_map>

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include "common/status.h"

namespace mgpu {
namespace {

// Reads within the payload only: a position or length past its end reads less (or nothing), which
// the zip reader reports as a malformed archive.
class BoundedReadAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BoundedReadAdapter(const std::string& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size()) return 0;
    const size_t count = std::min<uint64_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, count);
    return count;
  }

 private:
  const std::string& bytes_;
};

// Bytes of argument that follow an opcode of fixed size; -1 for an opcode with a length prefix
// (handled by the caller), -2 for one LibTorch's pickler never writes.
int FixedArgumentBytes(uint8_t op) {
  switch (op) {
    case '(': case ')': case ']': case '}': case 'e': case 'a': case 'u': case 's': case 't': case 'R':
    case 'b': case 'N': case 'Q': case '0': case '2': case 'l': case 'd': case '.':
    case 0x81: case 0x85: case 0x86: case 0x87: case 0x88: case 0x89: case 0x93: case 0x94:
      return 0;
    case 0x80: case 'K': case 'q': case 'h': return 1;  // PROTO, BININT1, BINPUT, BINGET
    case 'M': return 2;                                  // BININT2
    case 'J': return 4;                                  // BININT
    case 'G': case 0x95: return 8;                       // BINFLOAT, FRAME
    case 'r': case 'j':                                  // LONG_BINPUT, LONG_BINGET (checked below)
    case 0x8a: case 0x8b: case 'X': case 0x8c: case 0x8d: case 'U': case 'T': case 'B': case 'C': case 0x8e:
    case 'c':
      return -1;
    default:
      return -2;
  }
}

// Walks the pickle's opcodes, refusing any the unpickler would turn into an allocation larger
// than the pickle itself (a declared length, a memo index) or that LibTorch's pickler never writes.
void CheckPickle(const std::string& pickle, const std::string& path) {
  const auto refuse = [&](size_t at, const std::string& why) {
    throw BadInputError(fmt::format("checkpoint {}: its tensor archive's pickle is malformed at byte {}: {}; the file "
                                    "was altered or is not an mgpu checkpoint",
                                    path, at, why));
  };
  const auto number = [&](size_t at, size_t bytes) {
    if (at + bytes > pickle.size()) refuse(at, "it ends inside an argument");
    uint64_t value = 0;
    for (size_t i = 0; i < bytes; ++i) value |= uint64_t(uint8_t(pickle[at + i])) << (8 * i);
    return value;
  };
  for (size_t at = 0; at < pickle.size();) {
    const uint8_t op = uint8_t(pickle[at]);
    const size_t start = at++;
    if (op == '.') return;
    const int fixed = FixedArgumentBytes(op);
    if (fixed == -2) refuse(start, fmt::format("opcode 0x{:02x} is not one LibTorch's pickler writes", op));
    if (fixed >= 0) {
      if (at + fixed > pickle.size()) refuse(start, "it ends inside an argument");
      at += fixed;
      continue;
    }
    uint64_t length = 0;
    switch (op) {
      case 'r': case 'j':  // a memo index sizes the unpickler's memo table
        if (number(at, 4) > pickle.size()) refuse(start, fmt::format("memo index {} exceeds the pickle", number(at, 4)));
        at += 4;
        continue;
      case 'c':  // GLOBAL: module and name, each up to a newline
        for (int line = 0; line < 2; ++line) {
          const size_t end = pickle.find('\n', at);
          if (end == std::string::npos) refuse(start, "a GLOBAL's name has no end");
          at = end + 1;
        }
        continue;
      case 0x8a: case 0x8c: case 'U': case 'C': length = number(at, 1); at += 1; break;
      case 0x8b: case 'X': case 'T': case 'B': length = number(at, 4); at += 4; break;
      default: length = number(at, 8); at += 8; break;  // BINUNICODE8, BINBYTES8
    }
    if (length > pickle.size() - at) {
      refuse(start, fmt::format("it declares {} bytes where {} remain", length, pickle.size() - at));
    }
    at += length;
  }
  refuse(pickle.size(), "it has no STOP opcode");
}

// No archive mgpu writes nests containers deeper than this (a dict of dicts of tensors is 2).
constexpr int kMaxNesting = 8;

// The bytes of each storage record the unpickler read, by the address of its buffer.
using RecordSizes = std::unordered_map<const void*, size_t>;

// The unpickler rebuilds a tensor from the element count, storage offset, sizes and strides the
// pickle declares, without checking them against the storage's record: reading such a tensor
// reads past its buffer, and so does writing its storage again (the writer copies the declared
// bytes). Refuses a storage larger than its record, negative sizes and offsets, and any element
// beyond the record.
void CheckFitsStorage(const at::Tensor& tensor, const RecordSizes& record_sizes, const std::string& path) {
  if (!tensor.defined()) return;
  const auto refuse = [&](const std::string& why) {
    throw BadInputError(fmt::format("checkpoint {}: its tensor archive holds a tensor of shape [{}] that {}; the file "
                                    "was altered",
                                    path, fmt::join(tensor.sizes(), "x"), why));
  };
  const auto record = record_sizes.find(tensor.storage() ? tensor.storage().data() : nullptr);
  const size_t stored = record == record_sizes.end() ? 0 : record->second;
  if (tensor.storage().nbytes() > stored) {
    refuse(fmt::format("declares a storage of {} bytes in a record of {}", tensor.storage().nbytes(), stored));
  }
  if (tensor.storage_offset() < 0) refuse("starts before its storage");
  __int128 last = tensor.storage_offset();  // the last element's index in the storage
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    if (tensor.size(d) < 0 || tensor.stride(d) < 0) refuse("declares a negative size or stride");
    if (tensor.size(d) == 0) return;  // no element at all
    last += static_cast<__int128>(tensor.size(d) - 1) * tensor.stride(d);
  }
  const __int128 bytes = (last + 1) * static_cast<__int128>(tensor.element_size());
  const size_t usable = tensor.storage().nbytes();  // at most the record's bytes (above)
  if (bytes > static_cast<__int128>(usable)) refuse(fmt::format("reaches past its storage of {} bytes", usable));
}

// mgpu writes dense tensors only. The unpickler also rebuilds quantized ones, with whatever
// quantizer the pickle names: one it does not know fails LibTorch's internal assertions in
// whatever later touches the tensor (writing it again aborted fuzz_checkpoint).
void CheckDense(const at::Tensor& tensor, const std::string& path) {
  if (!tensor.defined() || (tensor.layout() == at::kStrided && !tensor.is_quantized())) return;
  throw BadInputError(fmt::format("checkpoint {}: its tensor archive holds a {} tensor of type {}, which no mgpu "
                                  "checkpoint has; the file was altered or is not an mgpu checkpoint",
                                  path, tensor.is_quantized() ? "quantized" : "non-dense", c10::toString(tensor.scalar_type())));
}

// Every tensor in `value` (dicts, lists and tuples of them, at most kMaxNesting deep) is dense and
// fits its storage.
void CheckValues(const c10::IValue& value, int depth, const RecordSizes& record_sizes, const std::string& path) {
  if (depth > kMaxNesting) {
    throw BadInputError(fmt::format("checkpoint {}: its tensor archive nests containers deeper than {}; the file was "
                                    "altered or is not an mgpu checkpoint",
                                    path, kMaxNesting));
  }
  if (value.isTensor()) {
    CheckDense(value.toTensor(), path);
    CheckFitsStorage(value.toTensor(), record_sizes, path);
  } else if (value.isList()) {
    for (const c10::IValue& item : value.toListRef()) CheckValues(item, depth + 1, record_sizes, path);
  } else if (value.isGenericDict()) {
    for (const auto& entry : value.toGenericDict()) {
      CheckValues(entry.key(), depth + 1, record_sizes, path);
      CheckValues(entry.value(), depth + 1, record_sizes, path);
    }
  } else if (value.isTuple()) {
    for (const c10::IValue& item : value.toTupleRef().elements()) CheckValues(item, depth + 1, record_sizes, path);
  }
}

}  // namespace

std::string WriteTorchArchive(const c10::IValue& value) {
  std::string pickle;
  torch::jit::Pickler pickler([&](const char* bytes, size_t size) { pickle.append(bytes, size); },
                              /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
                              /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  std::string archive;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t size) {
    archive.append(static_cast<const char*>(bytes), size);
    return size;
  });
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), writer);
  writer.writeEndOfFile();
  return archive;
}

c10::IValue ReadTorchArchive(const std::string& payload, const std::string& path) {
  try {
    caffe2::serialize::PyTorchStreamReader reader(std::make_shared<BoundedReadAdapter>(payload));
    for (const std::string& record : reader.getAllRecords()) {
      if (reader.getRecordSize(record) > payload.size()) {
        throw BadInputError(fmt::format("checkpoint {}: its tensor archive's record '{}' declares {} bytes, more than "
                                        "the {} bytes of the archive; the file was altered",
                                        path, record, reader.getRecordSize(record), payload.size()));
      }
    }
    if (!reader.hasRecord("data.pkl")) {
      throw BadInputError(fmt::format("checkpoint {}: its tensor archive has no data.pkl; the file was altered", path));
    }
    const auto [pickle_data, pickle_size] = reader.getRecord("data.pkl");
    const std::string pickle(static_cast<const char*>(pickle_data.get()), pickle_size);
    CheckPickle(pickle, path);
    // As torch::jit::readArchiveAndTensors, remembering each storage record's size: the unpickler
    // sizes a storage by the element count the pickle declares, not by its record.
    RecordSizes record_sizes;
    size_t read = 0;
    torch::jit::Unpickler unpickler(
        [&](char* buffer, size_t length) {
          length = std::min(length, pickle.size() - read);
          std::memcpy(buffer, pickle.data() + read, length);
          read += length;
          return length;
        },
        nullptr, nullptr,
        [&](const std::string& name) {
          auto [data, size] = reader.getRecord("data/" + name);
          record_sizes[data.get()] = size;
          return std::move(data);
        },
        std::nullopt);
    unpickler.set_version(reader.version());
    c10::IValue object = unpickler.parse_ivalue();
    CheckValues(object, 0, record_sizes, path);
    return object;
  } catch (const c10::Error& e) {
    throw BadInputError(fmt::format("checkpoint {}: its tensors cannot be loaded: {}", path, e.what_without_backtrace()));
  } catch (const std::bad_alloc&) {
    throw BadInputError(fmt::format("checkpoint {}: its tensors declare more memory than can be had; the file was "
                                    "altered", path));
  } catch (const std::length_error& e) {
    throw BadInputError(fmt::format("checkpoint {}: its tensor archive declares an impossible size ({})", path, e.what()));
  } catch (const BadInputError&) {
    throw;
  } catch (const std::exception& e) {
    // The type-tag parser and others LibTorch's unpickler calls throw their own kinds.
    throw BadInputError(fmt::format("checkpoint {}: its tensors cannot be loaded: {}", path, e.what()));
  }
}

}  // namespace mgpu
