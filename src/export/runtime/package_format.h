// The binary format of an exported korch package's model file (model.kpkg): a primitive graph,
// its plan and what the runtime needs to check before loading. Shared by the exporter (korch)
// and the package runtime, so it depends on the C++ standard library only. All integers are
// little-endian; strings and vectors are length-prefixed (u64). Reading is bounds-checked:
// a truncated or foreign file is a PackageError, never a crash.
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace korch_pkg {

constexpr char kMagic[8] = {'K', 'O', 'R', 'C', 'H', 'P', 'K', 'G'};
constexpr uint32_t kVersion = 2;  // 2: per-kernel schedule variant

struct PackageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Tensor kinds.
enum : uint8_t { kTensorInput = 0, kTensorConstant = 1, kTensorComputed = 2 };
// Attribute value kinds (the order of korch::AttrValue's alternatives).
enum : uint8_t { kAttrInt = 0, kAttrFloat = 1, kAttrInts = 2, kAttrFloats = 3, kAttrString = 4 };
// Kernel backends.
enum : uint8_t { kBackendReference = 0, kBackendHalide = 1, kBackendOneDNN = 2 };

class Writer {
 public:
  void u8(uint8_t v) { bytes_.push_back(v); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i32(int32_t v) { raw(&v, 4); }
  void i64(int64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void i32s(const std::vector<int32_t>& v) {
    u64(v.size());
    for (int32_t x : v) i32(x);
  }
  void i64s(const std::vector<int64_t>& v) {
    u64(v.size());
    for (int64_t x : v) i64(x);
  }
  void f64s(const std::vector<double>& v) {
    u64(v.size());
    for (double x : v) f64(x);
  }
  void strs(const std::vector<std::string>& v) {
    u64(v.size());
    for (const std::string& s : v) str(s);
  }
  void raw(const void* p, size_t n) {
    const unsigned char* c = static_cast<const unsigned char*>(p);
    bytes_.insert(bytes_.end(), c, c + n);
  }
  const std::vector<unsigned char>& bytes() const { return bytes_; }

 private:
  std::vector<unsigned char> bytes_;
};

class Reader {
 public:
  Reader(const unsigned char* data, size_t size, std::string what)
      : p_(data), end_(data + size), what_(std::move(what)) {}
  uint8_t u8() { return take<uint8_t>(); }
  uint32_t u32() { return take<uint32_t>(); }
  uint64_t u64() { return take<uint64_t>(); }
  int32_t i32() { return take<int32_t>(); }
  int64_t i64() { return take<int64_t>(); }
  double f64() { return take<double>(); }
  std::string str() {
    uint64_t n = count(1);
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  std::vector<int32_t> i32s() {
    std::vector<int32_t> v(count(4));
    for (auto& x : v) x = i32();
    return v;
  }
  std::vector<int64_t> i64s() {
    std::vector<int64_t> v(count(8));
    for (auto& x : v) x = i64();
    return v;
  }
  std::vector<double> f64s() {
    std::vector<double> v(count(8));
    for (auto& x : v) x = f64();
    return v;
  }
  std::vector<std::string> strs() {
    std::vector<std::string> v(count(8));
    for (auto& x : v) x = str();
    return v;
  }
  void expect_magic() {
    if (static_cast<size_t>(end_ - p_) < sizeof(kMagic) || std::memcmp(p_, kMagic, sizeof(kMagic)) != 0)
      throw PackageError(what_ + " is not a korch package model file (bad magic)");
    p_ += sizeof(kMagic);
  }
  bool at_end() const { return p_ == end_; }
  // Element count of a length-prefixed sequence whose elements take at least `min_size` bytes.
  uint64_t count(size_t min_size) {
    uint64_t n = u64();
    if (n > static_cast<uint64_t>(end_ - p_) / (min_size ? min_size : 1))
      throw PackageError(what_ + " is truncated or corrupt (a length runs past the end)");
    return n;
  }

 private:
  template <typename T>
  T take() {
    if (static_cast<size_t>(end_ - p_) < sizeof(T)) throw PackageError(what_ + " is truncated or corrupt");
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  const unsigned char* p_;
  const unsigned char* end_;
  std::string what_;
};

}  // namespace korch_pkg
