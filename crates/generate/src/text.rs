//! Generated prose: sentences, paragraphs and the titles of records, drawn
//! from the word lists.

use super::rng::Rng;
use super::words::{
    AUDIENCES, ENGINEERING_ROLES, FEATURES, HEADLINE_ADJECTIVES, HEADLINE_PRODUCTS, INVESTORS,
    NOTE_TITLES, OBJECTS, OUTLETS, PRESS_QUOTES, SPOKEN, SUBJECTS, TAILS, TASK_OBJECTS,
    TASK_QUALIFIERS, TASK_VERBS, VERBS,
};

/// Appends one sentence of portfolio-update prose.
fn sentence(rng: &mut Rng, s: &mut String) {
    s.push_str(rng.word(SUBJECTS));
    s.push(' ');
    s.push_str(rng.word(VERBS));
    s.push(' ');
    s.push_str(rng.word(OBJECTS));
    s.push_str(rng.word(TAILS));
    s.push('.');
}

/// Appends `lo..=hi` sentences separated by spaces.
pub(super) fn sentences(rng: &mut Rng, s: &mut String, lo: u64, hi: u64) {
    for i in 0..rng.between(lo, hi) {
        if i > 0 {
            s.push(' ');
        }
        sentence(rng, s);
    }
}

/// Appends paragraphs separated by blank lines.
pub(super) fn paragraphs(
    rng: &mut Rng,
    s: &mut String,
    count: (u64, u64),
    per_paragraph: (u64, u64),
) {
    for i in 0..rng.in_range(count) {
        if i > 0 {
            s.push_str("\n\n");
        }
        if rng.percent(15) {
            s.push_str("- ");
            sentence(rng, s);
            s.push_str("\n- ");
            sentence(rng, s);
        } else {
            sentences(rng, s, per_paragraph.0, per_paragraph.1);
        }
    }
}

/// Appends a company headline such as "AI-native procurement software for mid-market manufacturers".
pub(super) fn headline(rng: &mut Rng, s: &mut String) {
    s.push_str(rng.word(HEADLINE_ADJECTIVES));
    s.push(' ');
    s.push_str(rng.word(HEADLINE_PRODUCTS));
    s.push_str(" for ");
    s.push_str(rng.word(AUDIENCES));
}

/// Appends a task title of four to ten words.
pub(super) fn task_title(rng: &mut Rng, s: &mut String) {
    s.push_str(rng.word(TASK_VERBS));
    s.push(' ');
    s.push_str(rng.word(TASK_OBJECTS));
    let qualifier = rng.word(TASK_QUALIFIERS);
    let words = s.split(' ').count() + qualifier.split(' ').count();
    if words <= 10 && (words <= 5 || rng.percent(55)) {
        s.push(' ');
        s.push_str(qualifier);
    }
}

/// Appends a task description: one to four sentences, sometimes with a checklist.
pub(super) fn task_description(rng: &mut Rng, s: &mut String) {
    // Most descriptions are short; a few run to four sentences.
    let count = rng.weighted(&[(1, 35), (2, 35), (3, 20), (4, 10)]);
    sentences(rng, s, count, count);
    if rng.percent(10) {
        s.push_str("\n\nChecklist:\n- ");
        s.push_str(rng.word(TASK_OBJECTS));
        s.push_str("\n- ");
        s.push_str(rng.word(TASK_OBJECTS));
    }
}

/// Appends the title of a feed entry of type `kind` about `company`.
pub(super) fn feed_title(rng: &mut Rng, s: &mut String, kind: &str, company: &str) {
    match kind {
        "product-update" => {
            s.push_str(company);
            s.push_str(rng.word(&[" launches ", " ships ", " introduces ", " rolls out "]));
            s.push_str(rng.word(FEATURES));
        }
        "fundraise-announcement" => {
            s.push_str(company);
            s.push_str(" raises ");
            s.push_str(rng.word(&["$", "€"]));
            s.push_str(&rng.between(2, 80).to_string());
            s.push_str("M ");
            s.push_str(rng.word(&[
                "seed round",
                "Series A",
                "Series B",
                "Series C",
                "bridge round",
            ]));
            s.push_str(" led by ");
            s.push_str(rng.word(INVESTORS));
        }
        "hiring" => {
            s.push_str(company);
            s.push_str(rng.word(&[
                " is hiring a ",
                " opens a search for a ",
                " is looking for a ",
            ]));
            s.push_str(rng.word(ENGINEERING_ROLES));
        }
        _ => {
            s.push_str(company);
            s.push_str(rng.word(&[" featured in ", " profiled by ", " quoted in "]));
            s.push_str(rng.word(OUTLETS));
            s.push_str(": \"");
            s.push_str(rng.word(PRESS_QUOTES));
            s.push('"');
        }
    }
}

/// Appends the title of a note about `company`.
pub(super) fn note_title(rng: &mut Rng, s: &mut String, company: &str) {
    let template = rng.word(NOTE_TITLES);
    s.push_str(&template.replace("{}", company));
}

/// Appends the title of a meeting with `company`.
pub(super) fn meeting_title(rng: &mut Rng, s: &mut String, company: &str, workspace: &str) {
    match rng.below(5) {
        0 => {
            s.push_str(company);
            s.push_str(" <> ");
            s.push_str(workspace);
            s.push_str(" monthly sync");
        }
        1 => {
            s.push_str("Board meeting Q");
            s.push_str(&rng.between(1, 4).to_string());
            s.push_str(" – ");
            s.push_str(company);
        }
        2 => {
            s.push_str("Intro call: ");
            s.push_str(company);
        }
        3 => {
            s.push_str(company);
            s.push_str(": pricing & GTM deep dive");
        }
        _ => {
            s.push_str("Weekly check-in with ");
            s.push_str(company);
        }
    }
}

/// Appends a meeting summary in Markdown with action items.
pub(super) fn meeting_summary(rng: &mut Rng, s: &mut String) {
    s.push_str("## Summary\n");
    sentences(rng, s, 2, 5);
    s.push_str("\n\n## Action items\n");
    for _ in 0..rng.between(1, 4) {
        s.push_str("- [ ] ");
        s.push_str(rng.word(TASK_VERBS));
        s.push(' ');
        s.push_str(rng.word(TASK_OBJECTS));
        s.push('\n');
    }
}

/// Appends one transcript segment: one to three spoken sentences.
pub(super) fn transcript_line(rng: &mut Rng, s: &mut String) {
    for i in 0..rng.between(1, 3) {
        if i > 0 {
            s.push(' ');
        }
        if rng.percent(55) {
            s.push_str(rng.word(SPOKEN));
        } else {
            sentence(rng, s);
        }
    }
}
