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
    pub fn keyed(parts: &[u64]) -> Self {
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
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform integer in [0, n] (inclusive), n small.
    pub fn below_incl(&mut self, n: usize) -> usize {
        (self.next_u64() % (n as u64 + 1)) as usize
    }
}

/// A crop window in the source image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crop {
    pub x: usize,
    pub y: usize,
    pub w: usize,
    pub h: usize,
}

/// torchvision's RandomResizedCrop.get_params: ten tries at a random area and
/// log-uniform aspect ratio, then a centre crop with the ratio clamped.
pub fn random_resized_crop(width: usize, height: usize, rng: &mut Rng) -> Crop {
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
        for k in 0..n {
            let v = if sum > 0.0 { wf[k] / sum } else { 0.0 };
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
pub struct Scratch {
    tmp: Vec<u8>,
}

/// Resizes `crop` of the RGB8 image `src` (width `sw`) to `size`×`size` into
/// `out` (HWC, `size*size*3`), mirrored left–right when `flip`. Vertical pass
/// first (whole rows at a time, which vectorizes), then horizontal over the
/// `size` output rows only.
pub fn resize_crop(src: &[u8], sw: usize, crop: Crop, size: usize, flip: bool, out: &mut [u8], s: &mut Scratch) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { resize_crop_avx2(src, sw, crop, size, flip, out, s) };
    }
    resize_crop_impl(src, sw, crop, size, flip, out, s)
}

/// The same code compiled for AVX2, where its integer loops vectorize 8 wide.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn resize_crop_avx2(
    src: &[u8],
    sw: usize,
    crop: Crop,
    size: usize,
    flip: bool,
    out: &mut [u8],
    s: &mut Scratch,
) {
    resize_crop_impl(src, sw, crop, size, flip, out, s)
}

#[inline(always)]
fn resize_crop_impl(src: &[u8], sw: usize, crop: Crop, size: usize, flip: bool, out: &mut [u8], s: &mut Scratch) {
    debug_assert_eq!(out.len(), size * size * 3);
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
}
