//! GPU names as rows carry them, matched by one rule: NVML says "NVIDIA
//! H100 80GB HBM3" where a publication says "H100 80GB SXM5" and a datasheet
//! "H100 SXM". A name is read as its product (H200, H100, A100, V100, P100,
//! K80), whether it is a PCIe part (a name saying PCIe is; any other is SXM
//! or a single-form product), and its memory in GB where it gives one.
//! `report::published` and the datasheet peaks (`results::peak`) both match by it.

const PRODUCTS: [&str; 6] = ["H200", "H100", "A100", "V100", "P100", "K80"];

/// A GPU as the rule sees it: product, PCIe or not, memory in GB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GpuKey {
    pub product: &'static str,
    pub pcie: bool,
    pub mem_gb: Option<u32>,
}

/// `name` as the rule reads it; None for a name of no known product (a CPU).
pub(crate) fn gpu_key(name: &str) -> Option<GpuKey> {
    let upper = name.to_uppercase();
    let product = PRODUCTS.into_iter().find(|p| upper.contains(p))?;
    let mem_gb = upper
        .split(|c: char| !c.is_ascii_alphanumeric())
        .find_map(|w| w.strip_suffix("GB").and_then(|n| n.parse().ok()));
    Some(GpuKey { product, pcie: upper.contains("PCIE"), mem_gb })
}

/// The same product and form factor, and the same memory where both names give one.
pub(crate) fn same_gpu(a: &GpuKey, b: &GpuKey) -> bool {
    a.product == b.product
        && a.pcie == b.pcie
        && match (a.mem_gb, b.mem_gb) {
            (Some(x), Some(y)) => x == y,
            _ => true,
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_names_match_published_ones_by_the_rule() {
        let k = |n: &str| gpu_key(n).unwrap();
        assert!(same_gpu(&k("NVIDIA H100 80GB HBM3"), &k("H100 80GB SXM5")));
        assert!(!same_gpu(&k("NVIDIA H100 PCIe"), &k("H100 80GB SXM5")));
        assert!(same_gpu(&k("NVIDIA H200"), &k("H200 SXM")));
        assert!(same_gpu(&k("Tesla V100-SXM2-16GB"), &k("V100 16GB (DGX-1)")));
        assert!(!same_gpu(&k("Tesla V100-SXM2-32GB"), &k("V100 16GB")));
        assert!(same_gpu(&k("NVIDIA A100-SXM4-80GB"), &k("A100 80GB SXM4")));
        assert_eq!(gpu_key("AMD EPYC"), None);
    }
}
