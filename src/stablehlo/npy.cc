// .npy reading and writing (see npy.h). Format: magic "\x93NUMPY", version, header length, a
// Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }, raw data.
#include "tlaloc/stablehlo/npy.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tlaloc/support/atomic_file.h"

namespace tlaloc {

namespace {

struct DescrEntry {
  const char* code;  // kind and size, without the byte-order character
  ElementType type;
};
constexpr DescrEntry kDescrs[] = {
    {"b1", ElementType::kPred}, {"i1", ElementType::kS8},  {"i2", ElementType::kS16},
    {"i4", ElementType::kS32},  {"i8", ElementType::kS64}, {"u1", ElementType::kU8},
    {"u2", ElementType::kU16},  {"u4", ElementType::kU32}, {"u8", ElementType::kU64},
    {"f2", ElementType::kF16},  {"f4", ElementType::kF32}, {"f8", ElementType::kF64},
};

// Finds the value text after 'key': in the header dict.
StatusOr<std::string> DictValue(const std::string& header, const std::string& key,
                                const std::string& source) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return InvalidArgument(source + ": .npy header has no '" + key + "'");
  size_t colon = header.find(':', k);
  if (colon == std::string::npos) return InvalidArgument(source + ": malformed .npy header");
  size_t p = colon + 1;
  while (p < header.size() && header[p] == ' ') ++p;
  size_t end;
  if (p < header.size() && header[p] == '(') {
    end = header.find(')', p);
    if (end == std::string::npos) return InvalidArgument(source + ": unterminated shape tuple");
    ++end;
  } else if (p < header.size() && header[p] == '\'') {
    end = header.find('\'', p + 1);
    if (end == std::string::npos) return InvalidArgument(source + ": unterminated string");
    ++end;
  } else {
    end = header.find_first_of(",}", p);
    if (end == std::string::npos) end = header.size();
  }
  return header.substr(p, end - p);
}

}  // namespace

StatusOr<Literal> ParseNpy(std::string_view bytes, std::string_view source_name) {
  const std::string src(source_name);
  if (bytes.size() < 10 || bytes.substr(0, 6) != std::string_view("\x93NUMPY", 6))
    return InvalidArgument(src + ": not a .npy file (expected the magic \\x93NUMPY)");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return InvalidArgument(src + ": truncated .npy header");
    header_len = 0;
    for (int i = 3; i >= 0; --i)
      header_len = header_len * 256 + static_cast<unsigned char>(bytes[8 + i]);
    header_start = 12;
  } else {
    return InvalidArgument(src + ": unsupported .npy version " + std::to_string(major));
  }
  if (header_start + header_len > bytes.size())
    return InvalidArgument(src + ": truncated .npy header");
  const std::string header(bytes.substr(header_start, header_len));
  TL_ASSIGN_OR_RETURN(std::string descr, DictValue(header, "descr", src));
  TL_ASSIGN_OR_RETURN(std::string fortran, DictValue(header, "fortran_order", src));
  TL_ASSIGN_OR_RETURN(std::string shape_text, DictValue(header, "shape", src));
  if (fortran.rfind("False", 0) != 0)
    return InvalidArgument(src + ": Fortran-order .npy arrays are not supported");
  if (descr.size() != 5 || descr.front() != '\'' || descr.back() != '\'')
    return InvalidArgument(src + ": unsupported .npy dtype " + descr);
  const char order = descr[1];
  const std::string code = descr.substr(2, 2);
  std::optional<ElementType> et;
  for (const auto& d : kDescrs)
    if (code == d.code) et = d.type;
  if (!et || (order != '<' && order != '>' && order != '|' && order != '='))
    return InvalidArgument(src + ": unsupported .npy dtype " + descr +
                           " (expected bool, int8-64, uint8-64 or float16/32/64)");
  if (shape_text.size() < 2 || shape_text.front() != '(' || shape_text.back() != ')')
    return InvalidArgument(src + ": .npy shape " + shape_text + " is not a tuple");
  std::vector<int64_t> dims;
  {
    std::string inner = shape_text.substr(1, shape_text.size() - 2);
    std::stringstream ss(inner);
    std::string item;
    int64_t total = 1;
    while (std::getline(ss, item, ',')) {
      item.erase(std::remove(item.begin(), item.end(), ' '), item.end());
      if (item.empty()) continue;
      int64_t d = 0;
      for (char c : item) {
        if (c < '0' || c > '9' || d > (int64_t{1} << 40))
          return InvalidArgument(src + ": invalid .npy shape " + shape_text);
        d = d * 10 + (c - '0');
      }
      if (d > 0 && total > (int64_t{1} << 40) / d)
        return InvalidArgument(src + ": .npy shape too large");
      if (d > 0) total *= d;
      dims.push_back(d);
    }
  }
  // The running total above stays 0 after a zero dim; check the other dims' product too.
  TL_RETURN_IF_ERROR(CheckShape(dims, *et).WithContext(src));
  TensorType type(*et, dims);
  const size_t data_start = header_start + header_len;
  if (bytes.size() - data_start != static_cast<size_t>(type.byte_size()))
    return InvalidArgument(src + ": .npy data has " + std::to_string(bytes.size() - data_start) +
                           " bytes; " + type.ToString() + " needs " +
                           std::to_string(type.byte_size()));
  Literal lit(type);
  if (type.byte_size()) std::memcpy(lit.data(), bytes.data() + data_start, type.byte_size());
  const int es = ElementSize(*et);
  if (order == '>' && es > 1)
    for (int64_t i = 0; i < lit.num_elements(); ++i)
      std::reverse(lit.data() + i * es, lit.data() + (i + 1) * es);
  return lit;
}

StatusOr<Literal> ReadNpyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseNpy(ss.str(), path);
}

StatusOr<std::string> SerializeNpy(const Literal& literal) {
  const char* code = nullptr;
  for (const auto& d : kDescrs)
    if (d.type == literal.element_type()) code = d.code;
  if (!code)
    return InvalidArgument(std::string(MlirName(literal.element_type())) +
                           " has no standard .npy dtype");
  const char order = ElementSize(literal.element_type()) == 1 ? '|' : '<';
  std::string shape = "(";
  for (size_t i = 0; i < literal.dims().size(); ++i)
    shape += std::to_string(literal.dims()[i]) + (literal.dims().size() == 1      ? ","
                                                  : i + 1 < literal.dims().size() ? ", "
                                                                                  : "");
  shape += ")";
  std::string header = std::string("{'descr': '") + order + code +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces so the data starts on a 64-byte boundary; the header ends with '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(reinterpret_cast<const char*>(literal.data()), literal.byte_size());
  return out;
}

Status WriteNpyFile(const std::string& path, const Literal& literal) {
  TL_ASSIGN_OR_RETURN(std::string bytes, SerializeNpy(literal));
  return WriteStringAtomic(path, bytes);
}

}  // namespace tlaloc
