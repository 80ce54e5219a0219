//! Parsers for flag values: durations, sizes, on/off, fractions. Each names
//! the flag and the expected form in its error, which is a usage error.
use anyhow::Result;
use std::time::Duration;

use crate::error::usage;

/// `30s`, `2m`, `1m30s`, `500ms`: a positive duration.
pub(crate) fn parse_duration(flag: &str, s: &str) -> Result<Duration> {
    let d = parse_duration_or_zero(flag, s)?;
    if d.is_zero() {
        return Err(usage(format!("{flag} must be longer than zero")));
    }
    Ok(d)
}

/// `parse_duration` for the options where zero means something (no wait,
/// no latency, no minimum time).
pub(crate) fn parse_duration_or_zero(flag: &str, s: &str) -> Result<Duration> {
    if s.trim().starts_with('-') {
        return Err(usage(format!("{flag} {s}: a duration is zero or more, written like 30s, 2m or 500ms")));
    }
    humantime::parse_duration(s.trim())
        .map_err(|e| usage(format!("{flag} {s:?} is not a duration ({e}); write it like 30s, 2m, 1m30s or 500ms")))
}

/// `2G`, `1.5GiB`, `512M`, `800MB`, `1048576`: bytes (binary units).
pub(crate) fn parse_size(flag: &str, s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1048576.0,
        "g" | "gb" | "gib" => 1073741824.0,
        "t" | "tb" | "tib" => 1099511627776.0,
        _ => f64::NAN,
    };
    if t.starts_with('-') {
        return Err(usage(format!("{flag} {s}: a size is above zero, written like 800M, 2G or 1.5GiB")));
    }
    let v: f64 = num.parse().unwrap_or(f64::NAN);
    let bytes = v * mult;
    if !bytes.is_finite() || bytes < 1.0 {
        return Err(usage(format!("{flag} {s:?} is not a size; write it like 800M, 2G or 1.5GiB")));
    }
    Ok(bytes as u64)
}

/// `on`/`off` (or true/false, 1/0), for clap. An option that takes it also
/// takes the bare flag for on (`on_off_flag!`).
pub(crate) fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(format!("{s:?} is neither on nor off")),
    }
}

/// `5%` or `0.05`. A bare number of 1 or more is refused: `5` would mean 500%.
pub(crate) fn parse_fraction(s: &str) -> std::result::Result<f64, String> {
    let t = s.trim();
    let (num, pct) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    let v: f64 = num.parse().map_err(|_| format!("`{s}` is not a percentage; write e.g. 5% or 0.05"))?;
    let v = if pct { v / 100.0 } else { v };
    if !pct && v >= 1.0 {
        return Err(format!("`{s}` is ambiguous; write {s}% for a percentage, or a fraction below 1"));
    }
    if !(0.0..1.0).contains(&v) {
        return Err(format!("`{s}` must be at least 0% and below 100%"));
    }
    Ok(v)
}

/// A size that must be above zero (`--bucket-cap-mb`): checked here, where
/// the flag is defined, so every command that takes it refuses 0 alike.
pub(crate) fn parse_above_zero(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(_) => Err(format!("`{s}` must be above zero")),
        Err(_) => Err(format!("`{s}` is not a number")),
    }
}

/// `--batch-size`: images per device, 1 or more (checked here, where the
/// option is defined, for every command that takes it).
pub(crate) fn parse_batch_size(s: &str) -> std::result::Result<i64, String> {
    match s.trim().parse::<i64>() {
        Ok(v) if v >= 1 => Ok(v),
        Ok(_) => Err("must be at least 1 (it is per device)".into()),
        Err(_) => Err(format!("`{s}` is not a whole number of images")),
    }
}

/// `--steps`: timed steps, 1 or more.
pub(crate) fn parse_steps(s: &str) -> std::result::Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(v) if v >= 1 => Ok(v),
        Ok(_) => Err("must be at least 1".into()),
        Err(_) => Err(format!("`{s}` is not a whole number of steps")),
    }
}

pub(crate) fn parse_alpha(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v < 1.0 => Ok(v),
        _ => Err(format!("`{s}` must be a probability between 0 and 1, e.g. 0.05")),
    }
}

/// `--commit`: 4 to 64 hexadecimal digits (an abbreviated or a full SHA-1
/// or SHA-256 object name), so that a typo or a branch name given in its
/// place is refused before any work rather than stored in every row; in
/// lower case, as git writes it, so that one commit is one value.
pub(crate) fn parse_commit(s: &str) -> std::result::Result<String, String> {
    let ok = (4..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !ok {
        return Err(format!("{s:?} is not a commit: give 4 to 64 hexadecimal digits (git rev-parse HEAD)"));
    }
    Ok(s.to_ascii_lowercase())
}

/// `--branch`: any name but an empty one, or one with a newline or a comma,
/// which would not read back as one cell of a results file.
pub(crate) fn parse_branch(s: &str) -> std::result::Result<String, String> {
    if s.trim().is_empty() || s.contains(['\n', '\r', ',']) {
        return Err(format!("{s:?} is not a branch name: give a non-empty name without a comma or a newline"));
    }
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_is_4_to_64_hex_digits_and_a_branch_one_plain_name() {
        for ok in ["abc1", &"f".repeat(40), &"0".repeat(64)] {
            assert_eq!(parse_commit(ok).as_deref(), Ok(ok));
        }
        assert_eq!(parse_commit("ABCDEF0123").as_deref(), Ok("abcdef0123"));
        for bad in ["", "abc", "xyz!", "abcg", "main", &"a".repeat(65), " abc12"] {
            let e = parse_commit(bad).unwrap_err();
            assert!(e.contains("hexadecimal") && !e.contains('\n'), "{bad}: {e}");
        }
        assert_eq!(parse_branch("feature/x-1").as_deref(), Ok("feature/x-1"));
        for bad in ["", " ", "a,b", "a\nb", "a\r"] {
            assert!(parse_branch(bad).unwrap_err().contains("not a branch name"), "{bad:?}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("--duration", "1m30s").unwrap(), Duration::from_secs(90));
        for bad in ["soon", "0s", ""] {
            assert_eq!(crate::error::exit_code(&parse_duration("--duration", bad).unwrap_err()), 2, "{bad}");
        }
        assert_eq!(parse_duration_or_zero("--max-wait", "0s").unwrap(), Duration::ZERO);
        assert!(parse_duration_or_zero("--max-wait", "-1s").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("--mem-limit", "2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("--mem-limit", "1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("--mem-limit", "800m").unwrap(), 800 << 20);
        assert_eq!(parse_size("--mem-limit", "4096").unwrap(), 4096);
        for bad in ["", "x", "2X", "-1G", "0"] {
            assert_eq!(crate::error::exit_code(&parse_size("--mem-limit", bad).unwrap_err()), 2, "{bad}");
        }
    }

    #[test]
    fn max_drop_accepts_percent_and_fraction_only() {
        assert_eq!(parse_fraction("5%"), Ok(0.05));
        assert_eq!(parse_fraction("0.05"), Ok(0.05));
        assert_eq!(parse_fraction(" 12.5 % "), Ok(0.125));
        assert!(parse_fraction("5").unwrap_err().contains("ambiguous"));
        assert!(parse_fraction("fast").is_err());
        assert!(parse_fraction("-1%").is_err());
        assert!(parse_fraction("100%").is_err());
    }

    #[test]
    fn alpha_must_be_a_probability() {
        assert_eq!(parse_alpha("0.01"), Ok(0.01));
        assert!(parse_alpha("1").is_err());
        assert!(parse_alpha("0").is_err());
    }
}
