// KernelSpec: the in-memory key of a kernel, op-agnostic. Each op keeps its own typed spec (the
// fields its kernel compiles in, in the op's header) and stores it here as bytes: KernelSpec::of
// writes it, as<T>() reads it back. M (rows) is always a run-time argument.
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <concepts>
#include <type_traits>
#include <utility>

namespace nvfp4::jit::detail {

enum class Op : uint8_t { dequantize = 1, quantize = 2, row_amax = 3, amax_finalize = 4, convert_scales = 5, gemm = 6,
                          rmsnorm_quantize = 7, swiglu_quantize = 8, moe_stage = 9, prepack = 10,
                          mhc_rmsnorm_quantize = 11, moe_route = 21, moe_combine = 22,
                          fp8_activations = 23, gather_rows = 24 };

enum class Arch : uint8_t { sm_90a, sm_100a, sm_103a, sm_120a, sm_121a };
inline constexpr Arch kAllArchs[] = {Arch::sm_90a, Arch::sm_100a, Arch::sm_103a, Arch::sm_120a, Arch::sm_121a};
// What `prewarm` compiles for unless told: Hopper, datacenter and consumer Blackwell.
inline constexpr Arch kDefaultPrewarmArchs[] = {Arch::sm_90a, Arch::sm_100a, Arch::sm_120a};

std::string_view to_string(Arch arch);
std::string_view to_string(Op op);
std::optional<Arch> parse_arch(std::string_view name);
std::optional<Op> parse_op(std::string_view name);  // to_string(Op) back
// "sm_90a, sm_100a, ...": every arch, for messages.
std::string arch_names();
// `archs` joined by `separator`: arch_names(kDefaultPrewarmArchs, ",") is --arch's default.
std::string arch_names(std::span<const Arch> archs, std::string_view separator);
// The arch-specific target of a device (sm_90a for compute capability 9.0, ...).
std::optional<Arch> arch_for_compute_capability(int major, int minor);

inline constexpr uint8_t kNoDType = 0xFF;  // a dtype field the op does not use
std::string_view dtype_name(uint8_t dtype);

// An op's typed spec T: the fields its kernel compiles in, named for what they are. T lists
// them once, `template <class Self> static auto fields(Self& s) { return std::tie(s.k, ...); }`,
// which KernelSpec::of writes into the key field by field (so a struct's padding is never
// hashed) and as<T>() reads back; it names itself (`kName`) and the ops it serves
// (`static constexpr bool serves(Op)`; a one-op spec also `static constexpr Op kOp`).
template <class T>
concept OpSpec = std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T> &&
                 requires(T& t, Op op) {
                   T::fields(t);
                   { T::serves(op) } -> std::same_as<bool>;
                   { T::kName } -> std::convertible_to<std::string_view>;
                 };

[[noreturn]] void fail_spec_op(Op op, std::string_view spec_type);  // throws Error(internal)
size_t hash_bytes(const void* data, size_t size) noexcept;

struct KernelSpec {
  static constexpr size_t kPayloadBytes = 62;  // the largest op spec's fields (RowQuantizeSpec's, 48 bytes); the whole: 64

  Op op = Op::dequantize;
  Arch arch = Arch::sm_90a;
  unsigned char payload[kPayloadBytes] = {};  // the op spec's fields back to back, then zeros

  // The bytes of T's fields.
  template <OpSpec T>
  static constexpr size_t fields_bytes() {
    return []<class... F>(std::tuple<F&...>*) { return (sizeof(F) + ... + 0); }(
        static_cast<decltype(T::fields(std::declval<T&>()))*>(nullptr));
  }

  template <OpSpec T>
  static KernelSpec of(Arch arch, Op op, const T& spec) {
    static_assert(fields_bytes<T>() <= kPayloadBytes, "an op spec whose fields outgrow KernelSpec::kPayloadBytes");
    if (!T::serves(op)) fail_spec_op(op, T::kName);
    KernelSpec k;
    k.op = op;
    k.arch = arch;
    size_t at = 0;
    std::apply([&](const auto&... field) { (k.put(at, field), ...); }, T::fields(spec));
    return k;
  }
  template <OpSpec T>
  static KernelSpec of(Arch arch, const T& spec) { return of(arch, T::kOp, spec); }
  // The op's spec back; throws Error(internal) where this spec is another op's.
  template <OpSpec T>
  T as() const {
    if (!T::serves(op)) fail_spec_op(op, T::kName);
    T spec{};
    size_t at = 0;
    std::apply([&](auto&... field) { (get(at, field), ...); }, T::fields(spec));
    return spec;
  }
  template <OpSpec T>
  bool is() const { return T::serves(op); }

  bool operator==(const KernelSpec& o) const { return std::memcmp(this, &o, sizeof o) == 0; }
  // A readable one-line description and the sidecar's JSON object, from the op's own fields
  // (OpKernels::to_json).
  std::string describe() const;
  std::string to_json() const;

 private:
  template <class F>
  void put(size_t& at, const F& field) {
    static_assert(std::is_trivially_copyable_v<F> && std::has_unique_object_representations_v<F>);
    std::memcpy(payload + at, &field, sizeof field);
    at += sizeof field;
  }
  template <class F>
  void get(size_t& at, F& field) const {
    std::memcpy(&field, payload + at, sizeof field);
    at += sizeof field;
  }
};
static_assert(std::has_unique_object_representations_v<KernelSpec>, "KernelSpec must have no padding");

// Hashes a value by its bytes (a type with no padding).
template <class T>
struct BytesHash {
  static_assert(std::has_unique_object_representations_v<T>);
  size_t operator()(const T& value) const noexcept { return hash_bytes(&value, sizeof value); }
};
using KernelSpecHash = BytesHash<KernelSpec>;

}  // namespace nvfp4::jit::detail
