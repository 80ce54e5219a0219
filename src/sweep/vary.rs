//! `--vary OPTION=V1,V2,…`, the one grammar of a sweep's axes: the plan
//! crosses them and the frontier's levers are made of them (its own module,
//! so that neither of those imports the other).

/// `--vary OPTION=V1,V2,…`: an axis over any run option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vary {
    /// The option's long name, without dashes.
    pub option: String,
    pub values: Vec<String>,
    /// A flag (no value): varied as `on` (given) and `off` (not given).
    pub flag: bool,
}

impl Vary {
    /// The run arguments for one of the values.
    pub(crate) fn args(&self, value: &str) -> Vec<String> {
        match (self.flag, value) {
            (true, "on") => vec![format!("--{}", self.option)],
            (true, _) => vec![],
            (false, v) => vec![format!("--{}={v}", self.option)],
        }
    }
}
