//! `main` only maps the result of `gpubench::app::run` to an exit code; every
//! error is printed once, here, as one line.
use std::process::ExitCode;

fn main() -> ExitCode {
    // libtorch errors surface in tch as panics; they are caught and turned into
    // errors (see `gpubench::error::guarded`), so the default hook's backtrace noise is
    // never what the user should see.
    std::panic::set_hook(Box::new(|_| {}));
    #[cfg(feature = "torch")]
    gpubench::ffi::init_logging();
    let code = match std::panic::catch_unwind(gpubench::app::run) {
        Ok(Ok(code)) => code,
        Ok(Err(err)) => {
            eprintln!("error: {}", gpubench::error::one_line(&err));
            gpubench::error::exit_code(&err)
        }
        Err(payload) => {
            eprintln!("error: internal error: {}", gpubench::error::panic_message(&*payload));
            1
        }
    };
    ExitCode::from(code as u8)
}
