//! The world of a workspace, drawn before any collection is written: its
//! portfolio companies (with the names that exercise ordering) and its team.

use super::plan::WorkspaceSpec;
use super::rng::Rng;
use super::words::{CAFE_WORDS, FIRST_NAMES, LAST_NAMES, NAME_PREFIXES, NAME_SUFFIXES, NAME_TAILS};

/// A person with a display name and an email address.
#[derive(Clone, Debug)]
pub(super) struct Person {
    pub(super) name: String,
    pub(super) email: String,
}

/// A member of the workspace's team, who is assigned tasks and writes notes.
#[derive(Clone, Debug)]
pub(super) struct User {
    pub(super) id: u128,
    pub(super) person: Person,
}

/// A portfolio company and what other records need to know about it.
#[derive(Clone, Debug)]
pub(super) struct Company {
    pub(super) id: u128,
    pub(super) name: String,
    pub(super) slug: String,
    pub(super) domain: String,
    pub(super) currency: &'static str,
    pub(super) founders: Vec<Person>,
}

/// Everything generated before the collections are written.
pub(super) struct World {
    pub(super) companies: Vec<Company>,
    pub(super) users: Vec<User>,
    pub(super) short_name: &'static str,
}

impl World {
    /// Draws the companies and the team of a workspace.
    pub(super) fn build(rng: &mut Rng, spec: &WorkspaceSpec) -> Self {
        let names = company_names(rng, spec.plan.companies);
        let companies = names
            .into_iter()
            .enumerate()
            .map(|(i, name)| new_company(rng, name, i))
            .collect();
        let users = (0..spec.plan.users)
            .map(|_| User {
                id: rng.uuid(),
                person: new_person(rng, spec.mail_domain),
            })
            .collect();
        let short_name = spec.name.split(' ').next().unwrap_or(spec.name);
        Self {
            companies,
            users,
            short_name,
        }
    }

    /// Returns a random company.
    pub(super) fn company(&self, rng: &mut Rng) -> &Company {
        rng.pick(&self.companies)
    }
}

/// Returns `count` company names, the first seven of which are the ordering edge cases.
///
/// Names 0 and 1 are equal; name 2 extends the prefix of name 0; name 3
/// starts with "Öko"; names 4 and 5 are "Café …" and "Cafe…"; name 6 starts
/// with a lower-case letter. Later names are syllable combinations with an
/// occasional repeat of an earlier name.
fn company_names(rng: &mut Rng, count: usize) -> Vec<String> {
    let prefix = rng.word(NAME_PREFIXES);
    let mut names = vec![
        format!("{prefix}{}", rng.word(NAME_TAILS)),
        String::new(),
        format!("{prefix}{}", rng.word(NAME_SUFFIXES)),
        format!("Öko{}", rng.word(NAME_SUFFIXES)),
        format!("Café {}", rng.word(CAFE_WORDS)),
        format!("Cafe{}", rng.word(NAME_SUFFIXES)),
        format!("e{}", rng.word(NAME_PREFIXES)),
    ];
    names[1] = names[0].clone();
    while names.len() < count {
        let name = if names.len() % 97 == 50 {
            rng.pick(&names).clone()
        } else {
            syllable_name(rng)
        };
        names.push(name);
    }
    names.truncate(count);
    names
}

/// Returns a company name made of a prefix, a suffix and an optional word.
fn syllable_name(rng: &mut Rng) -> String {
    let mut name = String::from(rng.word(NAME_PREFIXES));
    if rng.percent(75) {
        name.push_str(rng.word(NAME_SUFFIXES));
    }
    if rng.percent(40) || name.len() < 6 {
        name.push_str(rng.word(NAME_TAILS));
    }
    name
}

/// Returns the ASCII lower-case form of `text` for domains, slugs and emails.
pub(super) fn ascii_slug(text: &str, separator: &str) -> String {
    let mut slug = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            'a'..='z' | '0'..='9' => slug.push(ch),
            'A'..='Z' => slug.push(ch.to_ascii_lowercase()),
            'ä' | 'Ä' => slug.push_str("ae"),
            'ö' | 'Ö' => slug.push_str("oe"),
            'ü' | 'Ü' => slug.push_str("ue"),
            'ß' => slug.push_str("ss"),
            'é' | 'è' | 'ë' | 'É' => slug.push('e'),
            'á' | 'à' => slug.push('a'),
            'í' => slug.push('i'),
            'ó' => slug.push('o'),
            'ñ' => slug.push('n'),
            ' ' | '-' => slug.push_str(separator),
            _ => {}
        }
    }
    slug
}

/// Returns a random person whose address is at `domain`.
pub(super) fn new_person(rng: &mut Rng, domain: &str) -> Person {
    let first = rng.word(FIRST_NAMES);
    let last = rng.word(LAST_NAMES);
    Person {
        name: format!("{first} {last}"),
        email: format!(
            "{}.{}@{domain}",
            ascii_slug(first, ""),
            ascii_slug(last, "")
        ),
    }
}

/// Returns company `index` of the workspace, named `name`.
fn new_company(rng: &mut Rng, name: String, index: usize) -> Company {
    let slug = ascii_slug(&name, "");
    let tld = if index == 1 {
        ".de"
    } else {
        rng.word(&[".com", ".io", ".ai", ".de", ".co", ".eu"])
    };
    let domain = format!("{slug}{tld}");
    let founders = (0..rng.between(2, 3))
        .map(|_| new_person(rng, &domain))
        .collect();
    Company {
        id: rng.uuid(),
        currency: rng.weighted(&[("USD", 65), ("EUR", 35)]),
        name,
        slug,
        domain,
        founders,
    }
}
