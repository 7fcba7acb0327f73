//! The sticky-prefix scenario (SPEC §6, §11): a scripted ten-turn coding session through the
//! real daemon against a provider with a DeepSeek-style prefix cache. Shared by the test that
//! asserts the invariants and the benchmark that reports the figures.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::Home;
use crate::fake_provider::{BYTES_PER_TOKEN, FakeProvider, text, tool_calls};

/// DeepSeek's cache unit, in tokens.
pub const UNIT_TOKENS: usize = 64;

/// One model request as the provider saw and billed it.
#[derive(Debug, Clone)]
pub struct Request {
    pub turn: usize,
    pub bytes: usize,
    /// Bytes added since the previous request: its new messages.
    pub new_bytes: usize,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
}

impl Request {
    pub fn uncached_tokens(&self) -> u64 {
        self.prompt_tokens - self.cached_tokens
    }

    pub fn new_message_tokens(&self) -> u64 {
        self.new_bytes.div_ceil(BYTES_PER_TOKEN) as u64
    }
}

#[derive(Debug, Clone)]
pub struct Run {
    pub requests: Vec<Request>,
    pub first_request_bytes: usize,
    /// Cumulative hit ratio at the end of each turn.
    pub cumulative_ratio: Vec<f64>,
    /// (prompt tokens, cached tokens) per turn.
    pub per_turn: Vec<(u64, u64)>,
}

/// How each of the ten turns goes, as a coding turn does: look at code in pieces, search,
/// run a check, look again, then answer.
fn script_turn(provider: &FakeProvider, turn: usize) {
    let module = format!("src/module{}.rs", turn % 3);
    let call = |step: &str| format!("{step}{turn}");
    provider
        .reply(tool_calls(&[(
            &call("read"),
            "read_file",
            json!({"path": module, "offset": 1 + (turn * 7) % 120, "limit": 24}),
        )]))
        .reply(tool_calls(&[(
            &call("grep"),
            "grep",
            json!({"pattern": format!("function_{}_{}", turn % 3, turn), "output": "files"}),
        )]))
        .reply(tool_calls(&[(
            &call("check"),
            "bash",
            json!({"command": format!("grep -c 'pub fn' {module}")}),
        )]))
        .reply(tool_calls(&[(
            &call("reread"),
            "read_file",
            json!({"path": module, "offset": 121 - (turn * 5) % 100, "limit": 16}),
        )]))
        .reply(text(&format!(
            "Turn {turn}: {module} holds 40 small arithmetic functions; function_{}_{turn} is there and nothing needs changing.",
            turn % 3
        )));
}

fn seed_workspace(home: &Home) {
    let src = home.workspace.join("src");
    std::fs::create_dir_all(&src).unwrap();
    for module in 0..3 {
        let body: String = (0..40)
            .map(|n| {
                format!(
                    "pub fn function_{module}_{n}(x: u32) -> u32 {{\n    x * {n} + {module}\n}}\n\n"
                )
            })
            .collect();
        std::fs::write(src.join(format!("module{module}.rs")), body).unwrap();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cache {
    /// The provider has never seen this prefix: the session's first request misses entirely.
    Cold,
    /// An earlier session in the same workspace ran one prompt: its system prompt and tool
    /// definitions are byte-identical to this session's, so they are already cached.
    Warm,
}

/// Runs the ten turns. With `unstable_prefix`, the session's system prompt gets a timestamp
/// before every turn (and the daemon restarts to load it): what an agent that puts the clock in
/// its prompt does.
pub async fn run_session(cache: Cache, unstable_prefix: bool) -> Run {
    const TURNS: usize = 10;
    let provider = FakeProvider::with_prefix_cache(UNIT_TOKENS).await;
    let home = Home::new(&provider.url);
    seed_workspace(&home);
    let mut daemon = Some(home.start_daemon());
    if cache == Cache::Warm {
        let earlier = home.new_session("yolo");
        provider.reply(text("Hello."));
        home.cli_ok(&["send", &earlier, "hello", "--wait"]);
    }
    let measured_from = provider.bodies().len();
    let id = home.new_session("yolo");
    let mut turn_of_request = Vec::new();
    for turn in 1..=TURNS {
        if unstable_prefix {
            drop(daemon.take());
            let system_file = home.paths.session_dir(&id).join("system.md");
            let prompt = std::fs::read_to_string(&system_file).unwrap();
            let base = prompt.split("\nCurrent time: ").next().unwrap().to_owned();
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            std::fs::write(&system_file, format!("{base}\nCurrent time: {now}")).unwrap();
            daemon = Some(home.start_daemon());
        }
        script_turn(&provider, turn);
        let before = provider.bodies().len();
        home.cli_ok(&[
            "send",
            &id,
            &format!("Look at module {} and tell me what it does.", turn % 3),
            "--wait",
        ]);
        turn_of_request.extend(std::iter::repeat_n(turn, provider.bodies().len() - before));
    }
    drop(daemon);
    measure(&provider, measured_from, &turn_of_request)
}

fn measure(provider: &FakeProvider, measured_from: usize, turn_of_request: &[usize]) -> Run {
    let bodies = provider.bodies().split_off(measured_from);
    let usage = provider.billed().split_off(measured_from);
    let mut requests = Vec::new();
    for (index, body) in bodies.iter().enumerate() {
        let shared = index
            .checked_sub(1)
            .map_or(0, |previous| common_prefix(&bodies[previous], body));
        requests.push(Request {
            turn: turn_of_request[index],
            bytes: body.len(),
            new_bytes: body.len() - shared,
            prompt_tokens: usage[index].0,
            cached_tokens: usage[index].1,
        });
    }
    let turns = turn_of_request.iter().copied().max().unwrap_or(0);
    let mut per_turn = Vec::new();
    let mut cumulative_ratio = Vec::new();
    let (mut prompt, mut cached) = (0u64, 0u64);
    for turn in 1..=turns {
        let (turn_prompt, turn_cached) = requests
            .iter()
            .filter(|request| request.turn == turn)
            .fold((0, 0), |(p, c), r| {
                (p + r.prompt_tokens, c + r.cached_tokens)
            });
        per_turn.push((turn_prompt, turn_cached));
        prompt += turn_prompt;
        cached += turn_cached;
        cumulative_ratio.push(cached as f64 / prompt as f64);
    }
    Run {
        first_request_bytes: bodies.first().map_or(0, Vec::len),
        requests,
        cumulative_ratio,
        per_turn,
    }
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
