//! HTML to readable Markdown, shared by `web_fetch` and `chrome_fetch`: what a reader of the page
//! sees (headings, text, lists, tables, links as Markdown links), without what only a browser
//! uses (scripts, styles) or what repeats on every page of a site (navigation, header, footer).

use std::borrow::Cow;

use htmd::HtmlToMarkdown;

/// Elements dropped with everything inside them.
const DROPPED: [&str; 14] = [
    "script", "style", "noscript", "template", "head", "nav", "header", "footer", "aside", "svg",
    "canvas", "iframe", "form", "button",
];

/// Tags nested deeper than this are dropped before parsing (their text stays): the parser scans
/// its stack of open elements at each tag and the converter recurses, so an untrusted page
/// nesting a million `<div>`s would take minutes or overflow the stack. Browsers cap the depth
/// at 512 too.
const MAX_DEPTH: usize = 512;

/// Elements whose end tag may be left out: counting them would make a long list look deep.
const UNNESTED: [&str; 22] = [
    "p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th", "tbody", "thead", "tfoot",
    "colgroup", "caption", "rt", "rp", "html", "head", "body", "br", "hr", "img",
];

/// Elements that hold no tags, only text: a `<` in a script is not a tag.
const RAW_TEXT: [&str; 4] = ["script", "style", "textarea", "title"];

/// Void elements besides those in [`UNNESTED`]: they never have children.
const VOID: [&str; 10] = [
    "area", "base", "col", "embed", "input", "link", "meta", "source", "track", "wbr",
];

/// The page's Markdown, with runs of blank lines folded to one. Slow on large pages: call it off
/// the async workers.
pub fn html_to_markdown(html: &str) -> String {
    let (html, flattened) = flatten_deep_nesting(html);
    let converter = HtmlToMarkdown::builder()
        .skip_tags(DROPPED.to_vec())
        .build();
    // The parser reads from a string in memory and does not fail in practice; the page's text
    // is still better than nothing.
    let mut markdown = converter
        .convert(&html)
        .unwrap_or_else(|_| html.clone().into_owned());
    if flattened {
        markdown.push_str(&format!(
            "\n\n[the page nests elements deeper than {MAX_DEPTH}: the deeper ones were \
             flattened into their text]"
        ));
    }
    fold_blank_lines(&markdown)
}

/// The HTML without the tags nested deeper than [`MAX_DEPTH`], and whether there were any. A
/// scan of tags, not a parse: approximate where a page is malformed, which only matters to
/// pages that deep.
fn flatten_deep_nesting(html: &str) -> (Cow<'_, str>, bool) {
    let mut kept = String::new();
    let mut copied_until = 0;
    let mut depth = 0usize;
    let mut position = 0;
    while let Some(offset) = html[position..].find('<') {
        let start = position + offset;
        let Some(length) = html[start..].find('>') else {
            break;
        };
        let end = start + length + 1;
        position = end;
        let tag = &html[start + 1..end - 1];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .map(|letter| letter.to_ascii_lowercase())
            .collect();
        if name.is_empty()
            || tag.ends_with('/')
            || UNNESTED.contains(&name.as_str())
            || VOID.contains(&name.as_str())
        {
            continue;
        }
        if !closing && RAW_TEXT.contains(&name.as_str()) {
            position = find_ignoring_case(html, end, &format!("</{name}")).unwrap_or(html.len());
            continue;
        }
        let too_deep = if closing {
            let deep = depth > MAX_DEPTH;
            depth = depth.saturating_sub(1);
            deep
        } else {
            depth += 1;
            depth > MAX_DEPTH
        };
        if too_deep {
            kept.push_str(&html[copied_until..start]);
            copied_until = end;
        }
    }
    if copied_until == 0 {
        return (Cow::Borrowed(html), false);
    }
    kept.push_str(&html[copied_until..]);
    (Cow::Owned(kept), true)
}

fn find_ignoring_case(haystack: &str, from: usize, needle: &str) -> Option<usize> {
    haystack.as_bytes()[from..]
        .windows(needle.len())
        .position(|window| window.eq_ignore_ascii_case(needle.as_bytes()))
        .map(|offset| from + offset)
}

/// Trailing spaces trimmed and at most one blank line in a row: dropped elements leave gaps.
fn fold_blank_lines(markdown: &str) -> String {
    let mut folded = String::with_capacity(markdown.len());
    let mut blank_run = 0;
    for line in markdown.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        folded.push_str(line);
        folded.push('\n');
    }
    folded.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_markdown_keeps_the_text_and_links_and_drops_scripts_and_chrome() {
        let html = r#"<!doctype html><html><head><title>T</title><style>p{color:red}</style>
            <script>var secret = "from a script";</script></head><body>
            <header><a href="/">Site logo</a></header>
            <nav><a href="/a">Menu entry</a></nav>
            <main><h1>Release notes</h1><p>Version <b>2</b> is out.</p>
            <p>See <a href="https://example.org/docs">the docs</a>.</p>
            <ul><li>one</li><li>two</li></ul></main>
            <footer>Copyright line</footer><script>document.write("x")</script></body></html>"#;

        let markdown = html_to_markdown(html);

        assert!(markdown.contains("Release notes"), "{markdown}");
        assert!(markdown.contains("Version **2** is out."), "{markdown}");
        assert!(
            markdown.contains("[the docs](https://example.org/docs)"),
            "{markdown}"
        );
        assert!(
            markdown.contains("one") && markdown.contains("two"),
            "{markdown}"
        );
        for dropped in [
            "from a script",
            "color:red",
            "Site logo",
            "Menu entry",
            "Copyright line",
            "document.write",
        ] {
            assert!(!markdown.contains(dropped), "{dropped} kept: {markdown}");
        }
        assert!(!markdown.contains("\n\n\n"), "{markdown:?}");
    }

    #[test]
    fn web_markdown_of_absurdly_deep_nesting_is_cut_not_a_stack_overflow() {
        let depth = 100_000;
        let html = format!(
            "<script>if (a<b) {{}}</script><p>top</p>{}deep text{}<p>after</p>",
            "<div>".repeat(depth),
            "</div>".repeat(depth)
        );
        let started = std::time::Instant::now();

        // A tokio blocking thread's stack, where the tools run it.
        let markdown = std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(move || html_to_markdown(&html))
            .unwrap()
            .join()
            .unwrap();

        assert!(started.elapsed() < std::time::Duration::from_secs(20));
        assert!(markdown.starts_with("top"), "{}", &markdown[..100]);
        assert!(markdown.contains("deep text"), "{markdown}");
        assert!(markdown.contains("after"), "{markdown}");
        assert!(markdown.contains("deeper than 512"), "{markdown}");

        let shallow = "<div><ul><li>a<li>b</ul></div>".repeat(2000);
        assert!(!flatten_deep_nesting(&shallow).1);
    }
}
