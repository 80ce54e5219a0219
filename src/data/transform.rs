//! The training transform of the ImageNet recipe on packed RGB8:
//! RandomResizedCrop (scale 0.08–1, ratio 3/4–4/3, torchvision's sampling)
//! resized with an antialiased bilinear (triangle) filter as PIL does, and a
//! horizontal flip with p = 0.5. The output stays uint8 (HWC); mean/std
//! normalization is done on the device (see `imagefolder`).

/// SplitMix64: a small, fast, portable generator, so that the same seed gives
/// the same crops and the same shuffles on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    /// A generator for a stream named by several numbers (seed, epoch, index).
    pub(crate) fn keyed(parts: &[u64]) -> Self {
        let mut r = Rng(0x9E37_79B9_7F4A_7C15);
        for &p in parts {
            r.0 ^= p;
            r.0 = r.next_u64();
        }
        r
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub(crate) fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform integer in [0, n] (inclusive), n small.
    pub(crate) fn below_incl(&mut self, n: usize) -> usize {
        (self.next_u64() % (n as u64 + 1)) as usize
    }
}

/// A crop window in the source image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Crop {
    pub x: usize,
    pub y: usize,
    pub w: usize,
    pub h: usize,
}

/// torchvision's RandomResizedCrop.get_params: ten tries at a random area and
/// log-uniform aspect ratio, then a centre crop with the ratio clamped.
pub(crate) fn random_resized_crop(width: usize, height: usize, rng: &mut Rng) -> Crop {
    const SCALE: (f64, f64) = (0.08, 1.0);
    const RATIO: (f64, f64) = (3.0 / 4.0, 4.0 / 3.0);
    let area = (width * height) as f64;
    let (lo, hi) = (RATIO.0.ln(), RATIO.1.ln());
    for _ in 0..10 {
        let target = area * (SCALE.0 + (SCALE.1 - SCALE.0) * rng.uniform());
        let ratio = (lo + (hi - lo) * rng.uniform()).exp();
        let w = (target * ratio).sqrt().round() as usize;
        let h = (target / ratio).sqrt().round() as usize;
        if w > 0 && h > 0 && w <= width && h <= height {
            let y = rng.below_incl(height - h);
            let x = rng.below_incl(width - w);
            return Crop { x, y, w, h };
        }
    }
    let in_ratio = width as f64 / height as f64;
    let (w, h) = if in_ratio < RATIO.0 {
        (width, ((width as f64 / RATIO.0).round() as usize).clamp(1, height))
    } else if in_ratio > RATIO.1 {
        (((height as f64 * RATIO.1).round() as usize).clamp(1, width), height)
    } else {
        (width, height)
    };
    Crop { x: (width - w) / 2, y: (height - h) / 2, w, h }
}

/// Filter taps for one output coordinate: first source index and weights in
/// 1/2^14 fixed point.
struct Taps {
    start: Vec<usize>,
    len: Vec<usize>,
    weights: Vec<i32>, // `support` per output
    support: usize,
}

const PREC: i32 = 14;

/// Triangle (bilinear) filter widened by the downscale factor, as PIL's
/// resize does: antialiased when shrinking, plain bilinear when enlarging.
fn taps(src: usize, dst: usize) -> Taps {
    let scale = src as f64 / dst as f64;
    let fscale = scale.max(1.0);
    let radius = fscale; // triangle support is 1 source pixel, widened
    let support = (radius.ceil() as usize) * 2 + 1;
    let mut t = Taps { start: vec![0; dst], len: vec![0; dst], weights: vec![0; dst * support], support };
    let mut wf = vec![0f64; support];
    for i in 0..dst {
        let center = (i as f64 + 0.5) * scale;
        let lo = ((center - radius).floor().max(0.0)) as usize;
        let hi = ((center + radius).ceil() as usize).min(src);
        let n = (hi - lo).min(support);
        let mut sum = 0.0;
        for (k, w) in wf.iter_mut().enumerate().take(n) {
            let x = ((lo + k) as f64 + 0.5 - center) / fscale;
            *w = (1.0 - x.abs()).max(0.0);
            sum += *w;
        }
        // Where the source is wide enough, every output gets exactly
        // `support` taps (window shifted inward, zero weights outside the
        // filter), so that the horizontal pass runs a fixed-length loop.
        let (start, shift) = if src >= support { (lo.min(src - support), lo - lo.min(src - support)) } else { (lo, 0) };
        t.start[i] = start;
        t.len[i] = if src >= support { support } else { n };
        for (k, &wk) in wf.iter().enumerate().take(n) {
            let v = if sum > 0.0 { wk / sum } else { 0.0 };
            t.weights[i * support + shift + k] = (v * (1 << PREC) as f64).round() as i32;
        }
    }
    t
}

#[inline]
fn clamp_u8(v: i32) -> u8 {
    ((v + (1 << (PREC - 1))) >> PREC).clamp(0, 255) as u8
}

/// Reusable buffers for `resize_crop`.
#[derive(Default)]
pub(crate) struct Scratch {
    tmp: Vec<u8>,
    /// Horizontal weights laid out for the AVX2 pass.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    hw: Vec<i16>,
}

/// Resizes `crop` of the RGB8 image `src` (width `sw`) to `size`×`size` into
/// `out` (HWC, `size*size*3`), mirrored left–right when `flip`. Vertical pass
/// first over the crop's full rows, then horizontal over the `size` rows only.
/// Both paths compute the same integer sums, so their outputs are identical.
pub(crate) fn resize_crop(src: &[u8], sw: usize, crop: Crop, size: usize, flip: bool, out: &mut [u8], s: &mut Scratch) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { avx2::resize_crop(src, sw, crop, size, flip, out, s) };
    }
    resize_crop_scalar(src, sw, crop, size, flip, out, s)
}

/// The portable path (and the reference the AVX2 path is tested against).
pub(crate) fn resize_crop_scalar(
    src: &[u8],
    sw: usize,
    crop: Crop,
    size: usize,
    flip: bool,
    out: &mut [u8],
    s: &mut Scratch,
) {
    assert_eq!(out.len(), size * size * 3);
    let hx = taps(crop.w, size);
    let vy = taps(crop.h, size);
    let cw = crop.w * 3;
    s.tmp.resize(size * cw, 0);
    let mut acc = vec![0i32; cw];
    for j in 0..size {
        let (st, n) = (vy.start[j], vy.len[j]);
        acc.fill(0);
        for (k, &wk) in vy.weights[j * vy.support..][..n].iter().enumerate() {
            let row = &src[((crop.y + st + k) * sw + crop.x) * 3..][..cw];
            for (a, &p) in acc.iter_mut().zip(row) {
                *a += p as i32 * wk;
            }
        }
        for (o, &a) in s.tmp[j * cw..][..cw].iter_mut().zip(&acc) {
            *o = clamp_u8(a);
        }
    }
    let dst_rows = out.chunks_exact_mut(size * 3);
    let src_rows = s.tmp.chunks_exact(cw);
    let fixed = crop.w >= hx.support;
    for (row, dst) in src_rows.zip(dst_rows) {
        match hx.support {
            3 if fixed => hpass::<3>(row, &hx, flip, dst),
            5 if fixed => hpass::<5>(row, &hx, flip, dst),
            7 if fixed => hpass::<7>(row, &hx, flip, dst),
            9 if fixed => hpass::<9>(row, &hx, flip, dst),
            _ => hpass_any(row, &hx, flip, dst),
        }
    }
}

/// AVX2 resize with `pmaddwd`: pixels widened to i16 and multiplied by i16
/// weights two taps at a time, summed in i32 (weights are at most 2^14, so
/// nothing overflows). The scalar loops above left the horizontal pass
/// unvectorized (3-byte pixels, per-pixel windows) and it cost more than the
/// JPEG's inverse DCT; here each output pixel takes a few instructions per
/// four taps.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{clamp_u8, taps, Crop, Scratch, PREC};
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn resize_crop(
        src: &[u8],
        sw: usize,
        crop: Crop,
        size: usize,
        flip: bool,
        out: &mut [u8],
        s: &mut Scratch,
    ) {
        assert_eq!(out.len(), size * size * 3);
        assert!(crop.x + crop.w <= sw && (crop.y + crop.h) * sw * 3 <= src.len());
        let hx = taps(crop.w, size);
        let vy = taps(crop.h, size);
        let cw = crop.w * 3;
        // The horizontal pass loads 16 bytes per group of four taps, reading
        // up to a group plus 16 bytes past a window; those lanes have weight 0.
        let groups = hx.support.div_ceil(4);
        let slack = (groups * 4 + 8) * 3 + 32;
        s.tmp.resize(size * cw + slack, 0);
        for j in 0..size {
            let (st, n) = (vy.start[j], vy.len[j]);
            let w = &vy.weights[j * vy.support..][..n];
            let first = ((crop.y + st) * sw + crop.x) * 3;
            vertical_row(src, first, sw * 3, w, cw, &mut s.tmp[j * cw..(j + 1) * cw]);
        }
        // Per output pixel, `groups` vectors of 16 i16 weights matching the
        // shuffled pixels [R0 R1 G0 G1 B0 B1 0 0 | R2 R3 G2 G3 B2 B3 0 0].
        s.hw.clear();
        s.hw.resize(size * groups * 16, 0);
        for i in 0..size {
            let w = &hx.weights[i * hx.support..][..hx.len[i]];
            for (k, &wk) in w.iter().enumerate() {
                let (g, t) = (k / 4, k % 4);
                let base = (i * groups + g) * 16 + (t / 2) * 8 + t % 2;
                for c in 0..3 {
                    s.hw[base + 2 * c] = wk as i16;
                }
            }
        }
        let mask = _mm_setr_epi8(0, 3, 1, 4, 2, 5, -1, -1, 6, 9, 7, 10, 8, 11, -1, -1);
        let pack = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
        let round = _mm_set1_epi32(1 << (PREC - 1));
        let tmp = s.tmp.as_ptr();
        let hw = s.hw.as_ptr();
        for j in 0..size {
            let row = tmp.add(j * cw);
            let dst = &mut out[j * size * 3..(j + 1) * size * 3];
            let h = Horizontal { row, start: &hx.start, hw, groups, mask, round, size, flip };
            let mut i = 0;
            while i + 4 <= size {
                let a = _mm_packs_epi32(h.pixel(i), h.pixel(i + 1));
                let b = _mm_packs_epi32(h.pixel(i + 2), h.pixel(i + 3));
                let px = _mm_shuffle_epi8(_mm_packus_epi16(a, b), pack);
                // 12 bytes, in bounds: i + 4 <= size.
                let d = dst[i * 3..i * 3 + 12].as_mut_ptr();
                _mm_storel_epi64(d as *mut __m128i, px);
                (d.add(8) as *mut i32).write_unaligned(_mm_extract_epi32::<2>(px));
                i += 4;
            }
            while i < size {
                let mut v = [0i32; 4];
                _mm_storeu_si128(v.as_mut_ptr() as *mut __m128i, h.pixel(i));
                for c in 0..3 {
                    dst[i * 3 + c] = v[c].clamp(0, 255) as u8;
                }
                i += 1;
            }
        }
    }

    /// The horizontal pass over one row of the vertical pass's output.
    struct Horizontal<'a> {
        row: *const u8,
        start: &'a [usize],
        hw: *const i16,
        groups: usize,
        mask: __m128i,
        round: __m128i,
        size: usize,
        flip: bool,
    }

    impl Horizontal<'_> {
        /// Output pixel `i` as [R G B 0] in i32, rounded and shifted.
        #[inline]
        #[target_feature(enable = "avx2")]
        unsafe fn pixel(&self, i: usize) -> __m128i {
            let t = if self.flip { self.size - 1 - i } else { i };
            let mut acc = _mm256_setzero_si256();
            let p = self.row.add(self.start[t] * 3);
            for g in 0..self.groups {
                let v = _mm_loadu_si128(p.add(g * 12) as *const __m128i);
                let v = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(v, self.mask));
                let wv = _mm256_loadu_si256(self.hw.add((t * self.groups + g) * 16) as *const __m256i);
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(v, wv));
            }
            let sum = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256::<1>(acc));
            _mm_srai_epi32::<PREC>(_mm_add_epi32(sum, self.round))
        }
    }

    /// One output row of the vertical pass: `out[x] = Σk w[k]·src[first + k·stride + x]`
    /// for x < out.len(), 32 bytes at a time (the last chunk overlaps the one
    /// before it rather than running past the row).
    #[target_feature(enable = "avx2")]
    unsafe fn vertical_row(src: &[u8], first: usize, stride: usize, w: &[i32], cw: usize, out: &mut [u8]) {
        debug_assert!(w.is_empty() || first + (w.len() - 1) * stride + cw <= src.len());
        if cw < 32 {
            for (x, o) in out.iter_mut().enumerate() {
                let a: i32 = w.iter().enumerate().map(|(k, &wk)| src[first + k * stride + x] as i32 * wk).sum();
                *o = clamp_u8(a);
            }
            return;
        }
        let zero = _mm256_setzero_si256();
        let round = _mm256_set1_epi32(1 << (PREC - 1));
        let base = src.as_ptr().add(first);
        let mut x = 0;
        loop {
            let x0 = x.min(cw - 32);
            let mut acc = [zero; 4];
            let mut k = 0;
            while k < w.len() {
                let a = _mm256_loadu_si256(base.add(k * stride + x0) as *const __m256i);
                let (b, wb) = if k + 1 < w.len() {
                    (_mm256_loadu_si256(base.add((k + 1) * stride + x0) as *const __m256i), w[k + 1])
                } else {
                    (zero, 0)
                };
                let wp = _mm256_set1_epi32((w[k] & 0xFFFF) | (wb << 16));
                let (al, ah) = (_mm256_unpacklo_epi8(a, zero), _mm256_unpackhi_epi8(a, zero));
                let (bl, bh) = (_mm256_unpacklo_epi8(b, zero), _mm256_unpackhi_epi8(b, zero));
                acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(_mm256_unpacklo_epi16(al, bl), wp));
                acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(_mm256_unpackhi_epi16(al, bl), wp));
                acc[2] = _mm256_add_epi32(acc[2], _mm256_madd_epi16(_mm256_unpacklo_epi16(ah, bh), wp));
                acc[3] = _mm256_add_epi32(acc[3], _mm256_madd_epi16(_mm256_unpackhi_epi16(ah, bh), wp));
                k += 2;
            }
            let r = acc.map(|v| _mm256_srai_epi32::<PREC>(_mm256_add_epi32(v, round)));
            // The in-lane unpacks above and these in-lane packs undo each other.
            let lo = _mm256_packs_epi32(r[0], r[1]);
            let hi = _mm256_packs_epi32(r[2], r[3]);
            _mm256_storeu_si256(out.as_mut_ptr().add(x0) as *mut __m256i, _mm256_packus_epi16(lo, hi));
            if x0 + 32 >= cw {
                break;
            }
            x += 32;
        }
    }
}

#[inline(always)]
fn put(dst: &mut [u8], size: usize, i: usize, flip: bool, a: i32, b: i32, c: i32) {
    let o = if flip { size - 1 - i } else { i };
    let px = &mut dst[o * 3..o * 3 + 3];
    px[0] = clamp_u8(a);
    px[1] = clamp_u8(b);
    px[2] = clamp_u8(c);
}

/// Horizontal pass with exactly N taps per output pixel.
#[inline(always)]
fn hpass<const N: usize>(row: &[u8], hx: &Taps, flip: bool, dst: &mut [u8]) {
    let size = hx.start.len();
    for i in 0..size {
        let w: &[i32; N] = hx.weights[i * N..i * N + N].try_into().unwrap();
        let st = hx.start[i] * 3;
        let p = &row[st..st + N * 3];
        let (mut a, mut b, mut c) = (0i32, 0i32, 0i32);
        for k in 0..N {
            a += p[k * 3] as i32 * w[k];
            b += p[k * 3 + 1] as i32 * w[k];
            c += p[k * 3 + 2] as i32 * w[k];
        }
        put(dst, size, i, flip, a, b, c);
    }
}

fn hpass_any(row: &[u8], hx: &Taps, flip: bool, dst: &mut [u8]) {
    let size = hx.start.len();
    for i in 0..size {
        let (st, n) = (hx.start[i], hx.len[i]);
        let w = &hx.weights[i * hx.support..][..n];
        let (mut a, mut b, mut c) = (0i32, 0i32, 0i32);
        for (p, &wk) in row[st * 3..(st + n) * 3].chunks_exact(3).zip(w) {
            a += p[0] as i32 * wk;
            b += p[1] as i32 * wk;
            c += p[2] as i32 * wk;
        }
        put(dst, size, i, flip, a, b, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crops_fit_and_follow_the_recipe() {
        let mut rng = Rng::new(1);
        for (w, h) in [(500, 375), (100, 700), (1, 1), (33, 17)] {
            for _ in 0..500 {
                let c = random_resized_crop(w, h, &mut rng);
                assert!(c.w >= 1 && c.h >= 1 && c.x + c.w <= w && c.y + c.h <= h, "{c:?} in {w}x{h}");
            }
        }
        // In a large image the ten tries nearly always succeed: the area is
        // 8–100% of the image and the ratio within 3/4–4/3 (up to rounding).
        for _ in 0..500 {
            let c = random_resized_crop(1000, 1000, &mut rng);
            let a = (c.w * c.h) as f64 / 1e6;
            let r = c.w as f64 / c.h as f64;
            assert!((0.07..=1.0).contains(&a), "{c:?}");
            assert!((0.74..=1.35).contains(&r), "{c:?}");
        }
    }

    #[test]
    fn resize_keeps_flat_colour_and_flips() {
        let (w, h) = (40, 30);
        let mut img = vec![0u8; w * h * 3];
        for y in 0..h {
            for x in 0..w {
                let p = &mut img[(y * w + x) * 3..][..3];
                p.copy_from_slice(&[200, 100, if x < w / 2 { 0 } else { 255 }]);
            }
        }
        let mut out = vec![0u8; 8 * 8 * 3];
        let mut s = Scratch::default();
        let all = Crop { x: 0, y: 0, w, h };
        resize_crop(&img, w, all, 8, false, &mut out, &mut s);
        assert!(out.chunks(3).all(|p| p[0] == 200 && p[1] == 100));
        assert_eq!(out[2], 0); // left column blue = 0
        assert_eq!(out[7 * 3 + 2], 255);
        resize_crop(&img, w, all, 8, true, &mut out, &mut s);
        assert_eq!(out[2], 255);
        assert_eq!(out[7 * 3 + 2], 0);
        // Enlarging a 1×1 crop.
        resize_crop(&img, w, Crop { x: 0, y: 0, w: 1, h: 1 }, 8, false, &mut out, &mut s);
        assert!(out.chunks(3).all(|p| p == [200, 100, 0]));
    }

    /// The AVX2 path must give exactly the scalar path's bytes: random
    /// crops (shrinking, enlarging, tiny, full), odd sizes (tails of the
    /// 4-pixel and 32-byte loops), both flips.
    #[test]
    fn simd_resize_matches_scalar() {
        let mut rng = Rng::new(7);
        for (w, h) in [(500, 375), (37, 29), (1200, 90), (5, 600)] {
            let img: Vec<u8> = (0..w * h * 3).map(|_| rng.next_u64() as u8).collect();
            for size in [224, 64, 17, 3, 1, 301] {
                let mut a = vec![0u8; size * size * 3];
                let mut b = vec![1u8; size * size * 3];
                let (mut sa, mut sb) = (Scratch::default(), Scratch::default());
                for t in 0..12 {
                    let crop = match t {
                        0 => Crop { x: 0, y: 0, w, h },
                        1 => Crop { x: w - 1, y: h - 1, w: 1, h: 1 },
                        _ => random_resized_crop(w, h, &mut rng),
                    };
                    let flip = t % 2 == 1;
                    resize_crop(&img, w, crop, size, flip, &mut a, &mut sa);
                    resize_crop_scalar(&img, w, crop, size, flip, &mut b, &mut sb);
                    assert!(a == b, "{w}x{h} {crop:?} -> {size}, flip {flip}");
                }
            }
        }
    }
}
