"""An independent numpy model of the NVFP4 formats (docs/formats.md), for checking the
library's CPU references through Python: decode, quantize (steps 1-4), the swizzled layout."""
import numpy as np

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float64)


def e4m3_values():
    """The value of each E4M3 (fn) code 0..255; NaN for 0x7F / 0xFF."""
    v = np.empty(256, np.float64)
    for c in range(256):
        s, e, m = c >> 7, (c >> 3) & 15, c & 7
        mag = m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        v[c] = np.nan if (c & 0x7F) == 0x7F else (-mag if s else mag)
    return v


E4M3 = e4m3_values()


def decode(q, scales, g, k):
    """float32 values of an NVFP4 [rows, k] matrix with linear scales (uint8 [rows, k/16]):
    e2m1 * e4m3 exact, times g one fp32 rounding."""
    rows = q.shape[0]
    nib = np.empty((rows, k), np.uint8)
    nib[:, 0::2], nib[:, 1::2] = q & 15, q >> 4
    e2m1 = np.where(nib & 8, -1.0, 1.0) * E2M1[nib & 7]
    s = np.repeat(E4M3[scales], 16, axis=1)
    prod = (e2m1 * s).astype(np.float32)  # exact
    return prod * np.float32(g).reshape(-1, 1) if np.ndim(g) else prod * np.float32(g)


def _round_to_grid(v, grid, even_codes):
    """Round |v| (float64, >= 0) to the nearest grid value, ties to the even code; saturating."""
    idx = np.clip(np.searchsorted(grid, v), 1, len(grid) - 1)
    lo, hi = grid[idx - 1], grid[idx]
    pick_hi = (hi - v < v - lo) | ((hi - v == v - lo) & even_codes[idx])
    return np.where(v >= grid[-1], len(grid) - 1, np.where(pick_hi, idx, idx - 1))


def e4m3_rne_satfinite(v):
    """Codes 0..0x7E of non-negative float32 v (NaN -> 0x7F)."""
    grid = E4M3[:0x7F]
    codes = _round_to_grid(np.nan_to_num(v.astype(np.float64), nan=0.0, posinf=1e9), grid, np.arange(0x7F) % 2 == 0)
    return np.where(np.isnan(v), 0x7F, codes).astype(np.uint8)


def e2m1_rne_satfinite(r):
    mag = _round_to_grid(np.abs(r).astype(np.float64), E2M1, np.arange(8) % 2 == 0)
    return (mag | np.where(np.signbit(r), 8, 0)).astype(np.uint8)


def quantize(x, g):
    """x float32 [rows, k], g float32 (scalar or per row) -> (q uint8 [rows, k/2], scales uint8
    [rows, k/16] linear), steps 1-4 of docs/formats.md."""
    rows, k = x.shape
    xb = x.reshape(rows, k // 16, 16)
    gb = np.broadcast_to(np.asarray(g, np.float32).reshape(-1, 1), (rows, k // 16)).astype(np.float32)
    bad = ~np.isfinite(xb).all(axis=2)
    amax = np.abs(np.where(np.isfinite(xb), xb, 0)).max(axis=2).astype(np.float32)
    scale = e4m3_rne_satfinite((amax / np.float32(6)) / gb)
    scale = np.where(bad, 0x7F, scale).astype(np.uint8)
    d = (E4M3[np.where(bad, 0, scale)].astype(np.float32) * gb).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = xb / d[:, :, None]
    nib = e2m1_rne_satfinite(np.where(np.isfinite(r), r, 0).astype(np.float32))
    nib = np.where((d[:, :, None] == 0) | bad[:, :, None], 0, nib).astype(np.uint8).reshape(rows, k)
    return (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8), scale


def global_scale(x, per_row=False):
    """amax / (6 * 448) over the finite values (per row or per tensor); 1 where amax is 0."""
    a = np.abs(np.where(np.isfinite(x), x, 0)).astype(np.float32)
    amax = a.max(axis=1) if per_row else np.float32(a.max())
    g = (amax / np.float32(6 * 448)).astype(np.float32)
    return np.where(amax == 0, np.float32(1), g).astype(np.float32)


def swizzle(scales_linear, rows, k):
    """The swizzled128x4 buffer (docs/formats.md) of linear scales [rows, k/16], padding zero."""
    kb_n = -(-(k // 16) // 4) * 4
    out = np.zeros(-(-rows // 128) * 128 * kb_n, np.uint8)
    r, kb = np.meshgrid(np.arange(rows), np.arange(k // 16), indexing="ij")
    off = ((r // 128) * (kb_n // 4) + kb // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + kb % 4
    out[off] = scales_linear
    return out


def bf16_bits(x):
    """float32 -> BF16 bits (uint16), round to nearest even."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f32(b):
    return (b.astype(np.uint32) << 16).view(np.float32)
