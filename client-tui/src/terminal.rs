//! The terminal's modes: raw input, the alternate screen, bracketed paste, mouse wheel
//! reports and unambiguous key codes while cwcode runs, and the user's terminal back as it was
//! on every way out: a normal exit, an error, a signal, or a panic (the hook restores first,
//! then lets the panic message print on a sane screen).

use std::io::{self, Stdout, Write};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::cursor::Show;
use crossterm::event::{
    DisableBracketedPaste, EnableBracketedPaste, KeyboardEnhancementFlags,
    PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

/// Mouse button and wheel reports in SGR encoding, and nothing else: crossterm's own mouse
/// capture also reports every motion, a flood of events for a wheel this program only wants.
const MOUSE_ON: &str = "\x1b[?1000h\x1b[?1006h";
const MOUSE_OFF: &str = "\x1b[?1006l\x1b[?1000l";

static ACTIVE: AtomicBool = AtomicBool::new(false);
static PANIC_HOOK: Once = Once::new();

pub type Term = Terminal<CrosstermBackend<Stdout>>;

/// Owns the terminal while the interface runs; dropping it restores the terminal.
pub struct Tui {
    pub terminal: Term,
}

impl Tui {
    pub fn enter() -> io::Result<Self> {
        PANIC_HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
            }));
        });
        enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let mut out = io::stdout();
        // Terminals without the keyboard protocol ignore the push; those with it then tell
        // Shift+Enter from Enter.
        let setup = execute!(
            out,
            EnterAlternateScreen,
            EnableBracketedPaste,
            PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES)
        )
        .and_then(|()| {
            out.write_all(MOUSE_ON.as_bytes())?;
            out.flush()
        });
        if let Err(error) = setup {
            restore();
            return Err(error);
        }
        match Terminal::new(CrosstermBackend::new(out)) {
            Ok(terminal) => Ok(Self { terminal }),
            Err(error) => {
                restore();
                Err(error)
            }
        }
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        restore();
    }
}

/// Puts the terminal back; does nothing when it is not in cwcode's modes (so the panic hook,
/// a drop and an explicit call may all run).
pub fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    let mut out = io::stdout();
    // Best effort: a terminal that is gone (SIGHUP) cannot be restored, nor told so.
    let _ = out.write_all(MOUSE_OFF.as_bytes());
    let _ = execute!(
        out,
        PopKeyboardEnhancementFlags,
        DisableBracketedPaste,
        LeaveAlternateScreen,
        Show
    );
    let _ = disable_raw_mode();
}
