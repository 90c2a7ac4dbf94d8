//! Kubernetes resource quantities (`2`, `500m`, `1.5Gi`, `1e9`, `8Ei`) as
//! whole numbers of a unit (bytes, millicores), with checked arithmetic: a
//! quantity too large for the sim is told apart from text that is not a
//! quantity at all, and nothing overflows.

use std::fmt;

/// Why a quantity was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantityError {
    /// Not the Kubernetes quantity syntax (or longer than 64 characters).
    Syntax,
    /// Below zero.
    Negative,
    /// More than a u64 of the unit holds.
    TooLarge,
    /// Finer than the unit (e.g. a fraction of a millicore) where the caller
    /// needs it exact.
    TooPrecise,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuantityError::Syntax => "not a quantity",
            QuantityError::Negative => "negative",
            QuantityError::TooLarge => "too large (over 18446744073709551615 of the unit)",
            QuantityError::TooPrecise => "finer than the unit allows",
        })
    }
}

/// Longest quantity text read.
const MAX_LEN: usize = 64;

/// `s` in units of 10^-`scale` (0: the value itself, 3: thousandths, as
/// millicores), rounded up as Kubernetes' `Value()` and `MilliValue()` do,
/// or with `exact` refused when a remainder is left.
pub fn parse(s: &str, scale: u32, exact: bool) -> Result<u64, QuantityError> {
    let s = s.trim();
    if s.is_empty() || s.len() > MAX_LEN {
        return Err(QuantityError::Syntax);
    }
    let (negative, rest) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let end = rest.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(end);
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(QuantityError::Syntax);
    }
    let (exp10, shift) = suffix_scale(suffix)?;
    // Trailing zeros of the fraction say nothing (`1.000…0` is 1).
    let frac = frac.trim_end_matches('0');
    // The significant digits as one integer, the point moved into exp10.
    let digits = format!("{whole}{frac}");
    let significant = digits.trim_start_matches('0');
    if significant.is_empty() {
        return Ok(0);
    }
    if negative {
        return Err(QuantityError::Negative);
    }
    // Keep as many leading digits as fit in a u128 once shifted by the binary
    // suffix (38 without one); the rest only matter as "something is left",
    // which rounds up as Kubernetes does (`0.5000…01` bytes is 1). Kept
    // digits >= 10^(max-1) make a large value overflow below, as it must.
    let max_digits = usize::try_from((128 - shift) * 30_103 / 100_000).unwrap_or(38).min(38);
    let (kept, dropped) = significant.split_at(significant.len().min(max_digits));
    let left_over = dropped.bytes().any(|b| b != b'0');
    let mut mantissa: u128 = kept.parse().map_err(|_| QuantityError::Syntax)?;
    let frac_len = i64::try_from(frac.len()).map_err(|_| QuantityError::Syntax)?;
    let dropped_len = i64::try_from(dropped.len()).map_err(|_| QuantityError::Syntax)?;
    let exp10 = exp10 + i64::from(scale) - frac_len + dropped_len;
    if left_over {
        if exp10 >= 0 {
            return Err(QuantityError::TooLarge);
        }
        if exact {
            return Err(QuantityError::TooPrecise);
        }
        // An upper bound of the dropped tail: the result is rounded up.
        mantissa += 1;
    }
    let scaled = mantissa.checked_shl(shift).filter(|v| v >> shift == mantissa).ok_or(QuantityError::TooLarge)?;
    let value = if exp10 >= 0 {
        let p = u32::try_from(exp10).ok().and_then(|e| 10u128.checked_pow(e)).ok_or(QuantityError::TooLarge)?;
        scaled.checked_mul(p).ok_or(QuantityError::TooLarge)?
    } else {
        match u32::try_from(-exp10).ok().and_then(|e| 10u128.checked_pow(e)) {
            Some(p) => {
                let (q, r) = (scaled / p, scaled % p);
                if r != 0 && exact {
                    return Err(QuantityError::TooPrecise);
                }
                q + u128::from(r != 0)
            }
            // Smaller than one unit (and not zero).
            None if exact => return Err(QuantityError::TooPrecise),
            None => 1,
        }
    };
    u64::try_from(value).map_err(|_| QuantityError::TooLarge)
}

/// The suffix as a power of ten and a power of two (`Ki`: 2^10, `k`: 10^3,
/// `e-3`: 10^-3).
fn suffix_scale(suffix: &str) -> Result<(i64, u32), QuantityError> {
    Ok(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let e = suffix.strip_prefix(['e', 'E']).ok_or(QuantityError::Syntax)?;
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || digits.len() > 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(QuantityError::Syntax);
            }
            (e.parse::<i64>().map_err(|_| QuantityError::Syntax)?, 0)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubernetes_forms() {
        assert_eq!(parse("1Gi", 0, false), Ok(1 << 30));
        assert_eq!(parse("1.5Gi", 0, false), Ok(3 << 29));
        assert_eq!(parse("512Mi", 0, false), Ok(512 << 20));
        assert_eq!(parse("1G", 0, false), Ok(1_000_000_000));
        assert_eq!(parse("1e9", 0, false), Ok(1_000_000_000));
        assert_eq!(parse("1E3", 0, false), Ok(1000));
        assert_eq!(parse("8Ei", 0, false), Ok(8 << 60));
        assert_eq!(parse("2P", 0, false), Ok(2_000_000_000_000_000));
        assert_eq!(parse("+7", 0, false), Ok(7));
        assert_eq!(parse("-0", 0, false), Ok(0));
        assert_eq!(parse("500m", 3, true), Ok(500));
        assert_eq!(parse("1.5", 3, true), Ok(1500));
        assert_eq!(parse(".5", 3, true), Ok(500));
        assert_eq!(parse("2", 3, true), Ok(2000));
        // Kubernetes rounds up: 1.5 bytes is 2.
        assert_eq!(parse("1.5", 0, false), Ok(2));
        assert_eq!(parse("1n", 0, false), Ok(1));
    }

    // Review finding: trailing fraction zeros counted as digits, so 1 byte
    // written with 40 digits was "too large". Many digits of a small value
    // round as Kubernetes does: memory up, CPU finer than 1m refused.
    #[test]
    fn small_values_with_many_digits_are_small() {
        let zeros = "0".repeat(39);
        assert_eq!(parse(&format!("1.{zeros}"), 0, false), Ok(1));
        assert_eq!(parse(&format!("0.5{zeros}0"), 0, false), Ok(1));
        assert_eq!(parse(&format!("1.{zeros}Gi"), 0, false), Ok(1 << 30));
        assert_eq!(parse(&format!("2.{zeros}"), 3, true), Ok(2000));
        // More than 38 significant digits, all below one unit: rounded up.
        let tail = "1".repeat(45);
        assert_eq!(parse(&format!("0.{tail}"), 0, false), Ok(1));
        assert_eq!(parse(&format!("1.{tail}"), 0, false), Ok(2));
        assert_eq!(parse(&format!("1.{tail}Ki"), 0, false), Ok(1138));
        assert_eq!(parse(&format!("0.{tail}Ei"), 0, false).map(|v| v > (1 << 60) / 9), Ok(true));
        // Digits past the 38 kept ones count even when the kept ones divide
        // exactly: 1.000…0011111111 bytes rounds up to 2, and is too fine for CPU.
        let exact_head = format!("1.{}11111111", "0".repeat(37));
        assert_eq!(parse(&exact_head, 0, false), Ok(2));
        assert_eq!(parse(&exact_head, 3, true), Err(QuantityError::TooPrecise));
        // Far below one unit, not zero: 1 when rounding, refused when exact.
        assert_eq!(parse("1e-999999", 0, false), Ok(1));
        // CPU: finer than 1m is refused, as before, not "too large".
        assert_eq!(parse(&format!("0.{tail}"), 3, true), Err(QuantityError::TooPrecise));
        assert_eq!(parse(&format!("0.5{zeros}"), 3, true), Ok(500));
    }

    #[test]
    fn every_suffix_scales_as_kubernetes_scales_it() {
        let cases = [
            ("3000n", 3, 1),
            ("3000000u", 0, 3),
            ("1500m", 0, 2),
            ("2k", 0, 2_000),
            ("2M", 0, 2_000_000),
            ("2G", 0, 2_000_000_000),
            ("2T", 0, 2_000_000_000_000),
            ("2P", 0, 2_000_000_000_000_000),
            ("2E", 0, 2_000_000_000_000_000_000),
            ("2Ki", 0, 2 << 10),
            ("2Mi", 0, 2 << 20),
            ("2Gi", 0, 2 << 30),
            ("2Ti", 0, 2 << 40),
            ("2Pi", 0, 2 << 50),
            ("2Ei", 0, 2 << 60),
        ];
        for (s, scale, want) in cases {
            assert_eq!(parse(s, scale, false), Ok(want), "{s}");
        }
    }

    // 64 characters are read, 65 refused; each reason has its own text.
    #[test]
    fn the_length_limit_is_inclusive_and_reasons_read_well() {
        let long = format!("{}1", "0".repeat(MAX_LEN - 1));
        assert_eq!(parse(&long, 0, false), Ok(1));
        assert_eq!(parse(&format!("0{long}"), 0, false), Err(QuantityError::Syntax));
        assert_eq!(QuantityError::Syntax.to_string(), "not a quantity");
        assert_eq!(QuantityError::Negative.to_string(), "negative");
        assert_eq!(QuantityError::TooLarge.to_string(), "too large (over 18446744073709551615 of the unit)");
        assert_eq!(QuantityError::TooPrecise.to_string(), "finer than the unit allows");
    }

    // The absurd-input sweep: huge, negative and malformed quantities get
    // a reason, and nothing overflows.
    #[test]
    fn absurd_quantities_are_refused_with_a_reason() {
        for s in [
            "1e30",
            "1000000000000000000000000000000000000000.5",
            "99999999999Ti",
            "99999999999999999999999Ei",
            "16Ei",
            "1e999999",
            "9".repeat(60).as_str(),
        ] {
            assert_eq!(parse(s, 0, false), Err(QuantityError::TooLarge), "{s}");
        }
        assert_eq!(parse("9223372036854775807", 3, true), Err(QuantityError::TooLarge));
        assert_eq!(parse("-1", 0, false), Err(QuantityError::Negative));
        assert_eq!(parse("1.2345", 3, true), Err(QuantityError::TooPrecise));
        assert_eq!(parse("1e-999999", 3, true), Err(QuantityError::TooPrecise));
        for s in
            ["", "x", "1.2.3", "1Gb", "1e", "1e1.5", "NaN", ".inf", "1 Gi", "--1", ".", "1e9999999", &"1".repeat(65)]
        {
            assert_eq!(parse(s, 0, false), Err(QuantityError::Syntax), "{s:?}");
        }
    }
}
