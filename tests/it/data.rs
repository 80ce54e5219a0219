//! `--data PATH`: an ImageFolder made at test time (JPEGs of several sizes and
//! modes, a PNG, a truncated JPEG, a text file named .JPEG), decoded, sharded,
//! and run end to end on the CPU.

use super::common::{assert_usage_error, gpubench, num, read_csv, stderr, stdout};
use gpubench::data::decode::decode_rgb;
use gpubench::data::imagefolder::{scan, Dataset, ImageFolder, Loader, LoaderConfig};
use gpubench::data::DataSource;
use std::collections::HashSet;
use std::path::Path;
use tch::{Device, Kind};

/// A structured picture (gradients, a disc, a checker band), as RGB8.
fn picture(w: usize, h: usize, seed: usize) -> Vec<u8> {
    let mut v = vec![0u8; w * h * 3];
    for y in 0..h {
        for x in 0..w {
            let (fx, fy) = (x as f32 / w as f32, y as f32 / h as f32);
            let disc = (fx - 0.5).powi(2) + (fy - 0.5).powi(2) < 0.05;
            let p = if disc {
                [220, 40, 60]
            } else if (x / 4 + y / 4 + seed).is_multiple_of(5) {
                [30, 200, 30]
            } else {
                [(255.0 * fx) as u8, (255.0 * fy) as u8, (seed * 40 % 256) as u8]
            };
            v[(y * w + x) * 3..][..3].copy_from_slice(&p);
        }
    }
    v
}

fn jpeg(path: &Path, w: usize, h: usize, seed: usize, progressive: bool) {
    let mut e = jpeg_encoder::Encoder::new_file(path, 90).unwrap();
    e.set_progressive(progressive);
    e.encode(&picture(w, h, seed), w as u16, h as u16, jpeg_encoder::ColorType::Rgb).unwrap();
}

fn gray_jpeg(path: &Path, w: usize, h: usize) {
    let px: Vec<u8> = (0..w * h).map(|i| (i % w * 255 / w) as u8).collect();
    jpeg_encoder::Encoder::new_file(path, 90)
        .unwrap()
        .encode(&px, w as u16, h as u16, jpeg_encoder::ColorType::Luma)
        .unwrap();
}

/// A flat CMYK JPEG: C=0 M=255 Y=255 K=0 is red.
fn cmyk_jpeg(path: &Path, w: usize, h: usize) {
    let px: Vec<u8> = (0..w * h).flat_map(|_| [0u8, 255, 255, 0]).collect();
    jpeg_encoder::Encoder::new_file(path, 90)
        .unwrap()
        .encode(&px, w as u16, h as u16, jpeg_encoder::ColorType::Cmyk)
        .unwrap();
}

fn png_file(path: &Path, w: u32, h: u32, color: [u8; 4]) {
    let f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut e = png::Encoder::new(f, w, h);
    e.set_color(png::ColorType::Rgba);
    e.set_depth(png::BitDepth::Eight);
    let data: Vec<u8> = (0..w * h).flat_map(|_| color).collect();
    e.write_header().unwrap().write_image_data(&data).unwrap();
}

/// train/{ant,bee,cat}: 9 good images, 1 truncated JPEG, 1 text file named
/// .JPEG (both skipped when met) and a notes.txt (not listed).
fn make_tree(dir: &Path) {
    let t = dir.join("train");
    for c in ["cat", "ant", "bee"] {
        std::fs::create_dir_all(t.join(c)).unwrap();
    }
    jpeg(&t.join("ant/a1.JPEG"), 50, 37, 1, false);
    jpeg(&t.join("ant/a2.jpg"), 17, 60, 2, false);
    gray_jpeg(&t.join("ant/a3.JPEG"), 40, 30);
    jpeg(&t.join("bee/b1.JPEG"), 64, 48, 3, true);
    cmyk_jpeg(&t.join("bee/b2.JPEG"), 24, 24);
    png_file(&t.join("bee/b3.png"), 30, 20, [10, 200, 30, 255]);
    jpeg(&t.join("cat/c1.JPEG"), 33, 33, 4, false);
    jpeg(&t.join("cat/c2.JPEG"), 80, 20, 5, false);
    jpeg(&t.join("cat/c3.JPEG"), 8, 8, 6, false);
    let mut full = vec![];
    jpeg_encoder::Encoder::new(&mut full, 90)
        .encode(&picture(64, 64, 7), 64, 64, jpeg_encoder::ColorType::Rgb)
        .unwrap();
    std::fs::write(t.join("cat/c4_truncated.JPEG"), &full[..full.len() / 2]).unwrap();
    std::fs::write(t.join("bee/b4_text.JPEG"), "not an image\n").unwrap();
    std::fs::write(t.join("cat/notes.txt"), "ignored").unwrap();
}

fn clean_tree(dir: &Path, per_class: usize) {
    for c in 0..2 {
        let d = dir.join(format!("class{c}"));
        std::fs::create_dir_all(&d).unwrap();
        for i in 0..per_class {
            jpeg(&d.join(format!("{i}.jpg")), 20 + i, 16, i, false);
        }
    }
}

fn cfg(batch: usize, workers: usize, seed: u64, rank: usize, world: usize) -> LoaderConfig {
    LoaderConfig { batch, image_size: 12, workers, seed, rank, world, pin: None, warn: false }
}

#[test]
fn decodes_every_mode_to_rgb() {
    let dir = tempfile::tempdir().unwrap();
    make_tree(dir.path());
    let t = dir.path().join("train");
    let mut rgb = vec![];
    let d = decode_rgb(&std::fs::read(t.join("ant/a2.jpg")).unwrap(), &mut rgb).unwrap();
    assert_eq!((d.width, d.height, rgb.len()), (17, 60, 17 * 60 * 3));
    // Grayscale: three equal channels.
    let d = decode_rgb(&std::fs::read(t.join("ant/a3.JPEG")).unwrap(), &mut rgb).unwrap();
    assert_eq!((d.width, d.height), (40, 30));
    assert!(rgb.chunks(3).all(|p| p[0] == p[1] && p[1] == p[2]));
    assert!(rgb.chunks(3).any(|p| p[0] > 200) && rgb.chunks(3).any(|p| p[0] < 30));
    // CMYK converted to RGB: red.
    decode_rgb(&std::fs::read(t.join("bee/b2.JPEG")).unwrap(), &mut rgb).unwrap();
    let p = &rgb[(12 * 24 + 12) * 3..][..3];
    assert!(p[0] > 200 && p[1] < 50 && p[2] < 50, "{p:?}");
    // Progressive decodes like the same picture in baseline.
    decode_rgb(&std::fs::read(t.join("bee/b1.JPEG")).unwrap(), &mut rgb).unwrap();
    let prog = rgb.clone();
    jpeg(&dir.path().join("base.jpg"), 64, 48, 3, false);
    decode_rgb(&std::fs::read(dir.path().join("base.jpg")).unwrap(), &mut rgb).unwrap();
    let diff: f64 = prog.iter().zip(&rgb).map(|(a, b)| (*a as f64 - *b as f64).abs()).sum::<f64>() / rgb.len() as f64;
    assert!(diff < 3.0, "mean abs diff {diff}");
    // PNG with alpha: RGB exactly.
    let d = decode_rgb(&std::fs::read(t.join("bee/b3.png")).unwrap(), &mut rgb).unwrap();
    assert_eq!((d.width, d.height), (30, 20));
    assert!(rgb.chunks(3).all(|p| p == [10, 200, 30]));
    // Truncated and non-image files are errors, not panics or grey pictures.
    let e = decode_rgb(&std::fs::read(t.join("cat/c4_truncated.JPEG")).unwrap(), &mut rgb).unwrap_err();
    assert!(e.to_string().contains("truncated"), "{e}");
    assert!(decode_rgb(b"not an image", &mut rgb).is_err());
    assert!(decode_rgb(&[0xFF, 0xD8, 0xFF], &mut rgb).is_err());
    assert!(decode_rgb(&[], &mut rgb).is_err());
}

#[test]
fn scan_sorts_classes_and_labels_files() {
    let dir = tempfile::tempdir().unwrap();
    make_tree(dir.path());
    let ds = scan(dir.path().to_str().unwrap()).unwrap();
    assert_eq!(ds.classes, ["ant", "bee", "cat"]);
    assert_eq!(ds.files.len(), 11, "notes.txt is not listed");
    for (f, &l) in ds.files.iter().zip(&ds.labels) {
        let class = f.parent().unwrap().file_name().unwrap().to_str().unwrap();
        assert_eq!(ds.classes[l as usize], class);
    }
    // The class folders may also be given directly.
    let direct = scan(dir.path().join("train").to_str().unwrap()).unwrap();
    assert_eq!(direct.files, ds.files);
}

/// Images, dataset indices and labels of each batch, and the skip count.
type Batches = (Vec<Vec<u8>>, Vec<Vec<u32>>, Vec<Vec<i64>>, u64);

fn batches(ds: &Dataset, c: LoaderConfig, n: usize) -> Batches {
    let mut l = Loader::new(ds.clone(), c).unwrap();
    let mut imgs = vec![];
    let mut idx = vec![];
    let mut labels = vec![];
    for _ in 0..n {
        let b = l.next_host().unwrap();
        assert_eq!(b.images.size(), [4, 12, 12, 3]);
        assert_eq!(b.images.kind(), Kind::Uint8);
        imgs.push(Vec::<u8>::try_from(b.images.flatten(0, -1)).unwrap());
        labels.push(Vec::<i64>::try_from(&b.labels).unwrap());
        idx.push(b.indices);
    }
    (imgs, idx, labels, l.skipped())
}

#[test]
fn bad_files_are_skipped_counted_and_batches_are_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    make_tree(dir.path());
    let ds = scan(dir.path().to_str().unwrap()).unwrap();
    let bad: HashSet<u32> = ds
        .files
        .iter()
        .enumerate()
        .filter(|(_, f)| f.to_str().unwrap().contains("_t"))
        .map(|(i, _)| i as u32)
        .collect();
    assert_eq!(bad.len(), 2);
    // 8 batches of 4 = 32 samples ≈ 3 epochs of 11: every file is met.
    let (imgs, idx, labels, skipped) = batches(&ds, cfg(4, 3, 7, 0, 1), 8);
    assert_eq!(skipped, 2);
    for (bi, bl) in idx.iter().zip(&labels) {
        for (i, l) in bi.iter().zip(bl) {
            assert!(!bad.contains(i), "bad file {i} in a batch");
            assert_eq!(ds.labels[*i as usize] as i64, *l);
        }
    }
    let seen: HashSet<u32> = idx.iter().flatten().copied().collect();
    assert_eq!(seen.len(), 9, "every good file appears");
    // Same seed: same batches, whatever the number of workers, and whichever
    // worker happens to find a bad file first (a replacement's crop once
    // depended on that).
    for workers in [1, 2, 4] {
        let (imgs1, idx1, _, _) = batches(&ds, cfg(4, workers, 7, 0, 1), 8);
        assert_eq!(idx, idx1, "{workers} workers");
        assert!(imgs == imgs1, "{workers} workers: other pixels for the same files");
    }
    // Another seed: another order or other crops.
    let (imgs2, idx2, _, _) = batches(&ds, cfg(4, 2, 8, 0, 1), 8);
    assert!(idx2 != idx || imgs2 != imgs);
    // Pictures, not blanks: the pixels vary.
    assert!(imgs[0].iter().max() > imgs[0].iter().min());
}

#[test]
fn shards_are_disjoint_and_cover_all_but_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    clean_tree(dir.path(), 7); // 14 images, 3 ranks: 4 each, 2 dropped
    let ds = scan(dir.path().to_str().unwrap()).unwrap();
    let world = 3;
    let mut epoch0: Vec<HashSet<u32>> = vec![];
    let mut epoch1: Vec<Vec<u32>> = vec![];
    for rank in 0..world {
        // 2 batches of 4 = 2 epochs of 4 per rank.
        let (_, idx, _, skipped) = batches(&ds, cfg(4, 2, 3, rank, world), 2);
        assert_eq!(skipped, 0);
        assert_eq!(idx[0].iter().collect::<HashSet<_>>().len(), 4);
        epoch0.push(idx[0].iter().copied().collect());
        epoch1.push(idx[1].clone());
    }
    let mut union = HashSet::new();
    for s in &epoch0 {
        assert!(union.is_disjoint(s));
        union.extend(s.iter().copied());
    }
    assert_eq!(union.len(), 12);
    // Reshuffled each epoch.
    assert!((0..world).any(|r| epoch1[r].iter().copied().collect::<HashSet<_>>() != epoch0[r]));
}

#[test]
fn source_gives_normalized_float_batches() {
    let dir = tempfile::tempdir().unwrap();
    make_tree(dir.path());
    let p = dir.path().to_str().unwrap();
    for channels_last in [false, true] {
        let ds = scan(p).unwrap();
        let mut src = ImageFolder::new(ds, cfg(4, 2, 1, 0, 1), Device::Cpu, channels_last, p).unwrap();
        assert_eq!(src.name(), format!("imagefolder:{p}"));
        for _ in 0..4 {
            let b = src.next_batch().unwrap();
            assert_eq!(b.images.size(), [4, 3, 12, 12]);
            assert_eq!(b.images.kind(), Kind::Float);
            assert_eq!(b.labels.kind(), Kind::Int64);
            assert_eq!(gpubench::ffi::is_channels_last(&b.images), channels_last);
            let (lo, hi) = (b.images.min().double_value(&[]), b.images.max().double_value(&[]));
            // (0 − 0.485)/0.229 = −2.118 … (1 − 0.406)/0.225 = 2.64
            assert!(lo >= -2.12 && hi <= 2.641 && hi > lo, "{lo} {hi}");
            let l = Vec::<i64>::try_from(&b.labels).unwrap();
            assert!(l.iter().all(|&x| (0..3).contains(&x)));
        }
        assert!(src.bad_files().unwrap().len() <= 2);
    }
}

#[test]
fn layout_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let base = "run --cpu --model tinycnn --image-size 16 --steps 1 --data";
    let missing = dir.path().join("nope");
    assert_usage_error(&format!("{base} {}", missing.display()), "no such directory");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_usage_error(&format!("{base} {}", empty.display()), "no class folders");
    let flat = dir.path().join("flat");
    std::fs::create_dir(&flat).unwrap();
    jpeg(&flat.join("x.jpg"), 8, 8, 0, false);
    assert_usage_error(&format!("{base} {}", flat.display()), "no class folders");
    assert_usage_error(&format!("{base} {}", flat.join("x.jpg").display()), "is a file");
    let noimg = dir.path().join("noimg");
    std::fs::create_dir_all(noimg.join("a")).unwrap();
    std::fs::write(noimg.join("a/readme.txt"), "x").unwrap();
    assert_usage_error(&format!("{base} {}", noimg.display()), "hold no .jpg");
    let tree = dir.path().join("tree");
    make_tree(&tree);
    let t = tree.display();
    assert_usage_error(&format!("{base} {t} --num-classes 2"), "has 3 classes");
    assert_usage_error(&format!("{base} {t} --workers 0"), "--workers");
    assert_usage_error(&format!("data-bench --data {}", missing.display()), "no such directory");
}

fn run_ok(dir: &Path, extra: &str) -> std::collections::HashMap<String, String> {
    let out = dir.join(format!("r{}.csv", extra.len()));
    let data = dir.join("tree");
    let o = gpubench(&format!(
        "run --model tinycnn --image-size 16 --num-classes 3 --batch-size 2 --steps 6 --warmup 1 --workers 2 \
         --data {} --out {} {extra}",
        data.display(),
        out.display()
    ))
    .output();
    assert_eq!(o.status.code(), Some(0), "{extra:?}: {}\n{}", stderr(&o), stdout(&o));
    let r = read_csv(&out).pop().unwrap();
    assert_eq!(r["data"], format!("imagefolder:{}", data.display()));
    assert_eq!(r["workers"], "2");
    assert_eq!(r["status"], "ok");
    assert!(num(&r, "loss_last").is_finite());
    r
}

#[test]
fn runs_end_to_end_single_dp_and_ddp() {
    let dir = tempfile::tempdir().unwrap();
    make_tree(&dir.path().join("tree"));
    // 7 warm-up+timed steps × 2 images = 14 > 11 files: both bad files are met.
    let r = run_ok(dir.path(), "--cpu");
    assert_eq!(r["data_skipped"], "2");
    let r = run_ok(dir.path(), "--cpu 2 --strategy dp --channels-last");
    assert_eq!(r["global_batch"], "4");
    assert_eq!(r["data_skipped"], "2");
    // Two micro-batches a step, from two shards of the one scanned tree; a
    // bad file both met counts once.
    let r = run_ok(dir.path(), "--cpu --grad-accum 2");
    assert_eq!((r["global_batch"].as_str(), r["grad_accum"].as_str()), ("4", "2"));
    assert_eq!(r["data_skipped"], "2");
    let r = run_ok(dir.path(), "--cpu 2 --strategy ddp");
    assert_eq!(r["n_devices"], "2");
    // 11 files, 5 per rank per epoch, reshuffled: over 3 epochs both ranks
    // meet both bad files, and the row counts each file once, not per rank.
    assert_eq!(r["data_skipped"], "2");
    let o = gpubench(&format!(
        "data-bench --data {} --workers 2 --image-size 16 --batch-size 4 --duration 300ms --format json",
        dir.path().join("tree").display()
    ))
    .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    super::common::assert_envelope(&doc);
    let v = &doc["data_bench"];
    assert_eq!(v["files"], 11);
    assert!(v["pipeline_img_s"].as_f64().unwrap() > 0.0 && v["decode_img_s"].as_f64().unwrap() > 0.0);
    assert_eq!(v["decode_files"], 9);
}

#[test]
fn infer_serves_a_folders_images_as_frames_and_refuses_one_without_any() {
    let dir = tempfile::tempdir().unwrap();
    make_tree(dir.path());
    let out = dir.path().join("infer.csv");
    let a = format!(
        "infer --cpu 1 --model tinycnn --image-size 32 --num-classes 10 --frame-size 64x48 --warmup-batches 1 --scenario offline \
         --duration 1s -q --data {} --out {}",
        dir.path().display(),
        out.display()
    );
    let o = gpubench(&a).run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let r = read_csv(&out).pop().unwrap();
    assert_eq!(r["status"], "ok", "{}", r["error"]);
    assert!(r["data"].contains(&dir.path().display().to_string()), "{}", r["data"]);
    let empty = tempfile::tempdir().unwrap();
    std::fs::write(empty.path().join("notes.txt"), "no images").unwrap();
    assert_usage_error(
        &format!("infer --cpu 1 --model tinycnn --image-size 32 --data {}", empty.path().display()),
        "no readable JPEG or PNG",
    );
}
