//! The `companies` collection.

use std::io::{self, Write};

use super::context::WriterContext;
use super::text::{headline, sentences};
use super::words::{AUDIENCES, LABELS, PROBLEMS, SOLUTIONS};
use super::world::{Company, World};

/// Writes `companies` and returns how many there are.
pub(super) fn write_companies<W: Write>(
    ctx: &mut WriterContext,
    world: &World,
    w: &mut W,
) -> io::Result<u64> {
    ctx.begin_collection("companies");
    for (index, company) in world.companies.iter().enumerate() {
        write_company(ctx, company, index);
        ctx.end_record(w)?;
    }
    ctx.json.end_array();
    Ok(world.companies.len() as u64)
}

/// Writes the id and attributes of one company (the record stays open).
fn write_company(ctx: &mut WriterContext, company: &Company, index: usize) {
    ctx.begin_record(company.id);
    ctx.str_field("domain", &company.domain);
    ctx.str_field("name", &company.name);
    ctx.str_field(
        "logo_url",
        &format!("https://{}/assets/logo.png", company.domain),
    );
    ctx.text_field("headline", headline);
    ctx.text_field("description", |rng, s| sentences(rng, s, 2, 4));
    ctx.str_field(
        "professional_network",
        &format!("https://www.linkedin.com/company/{}", company.slug),
    );
    match index % 9 {
        // Omitted on some companies, null on others.
        5 => {}
        8 => {
            ctx.json.key("x");
            ctx.json.null();
        }
        _ => ctx.str_field("x", &format!("https://x.com/{}", company.slug)),
    }
    let careers = if index % 4 == 3 {
        format!("https://jobs.{}", company.domain)
    } else {
        format!("https://{}/careers", company.domain)
    };
    ctx.str_field("careers_url", &careers);
    write_domain_aliases(ctx, company);
    ctx.json.key("priority");
    let priority = match index {
        0 => Some("high"),
        7 => None,
        _ => ctx.rng.weighted(&[
            (Some("high"), 30),
            (Some("medium"), 35),
            (Some("low"), 25),
            (None, 10),
        ]),
    };
    ctx.json.opt_string(priority);
    write_labels(ctx);
    write_value_propositions(ctx);
}

/// Writes `domain_aliases`: zero to two other domains of the company.
fn write_domain_aliases(ctx: &mut WriterContext, company: &Company) {
    ctx.json.key("domain_aliases");
    ctx.json.begin_array();
    let count = ctx.rng.below(3);
    let forms = ["{}.com", "get{}.com", "{}.eu", "{}hq.com"];
    let start = ctx.rng.index(forms.len());
    for i in 0..count as usize {
        let alias = forms[(start + i) % forms.len()].replace("{}", &company.slug);
        if alias != company.domain {
            ctx.json.string(&alias);
        }
    }
    ctx.json.end_array();
}

/// Writes `labels`: one to four distinct labels.
fn write_labels(ctx: &mut WriterContext) {
    ctx.json.key("labels");
    ctx.json.begin_array();
    let count = ctx.rng.between(1, 4) as usize;
    let start = ctx.rng.index(LABELS.len());
    let step = 1 + ctx.rng.index(3);
    for i in 0..count {
        ctx.json.string(LABELS[(start + i * step) % LABELS.len()]);
    }
    ctx.json.end_array();
}

/// Writes `value_propositions`: one to three problem, solution and ICP triples.
fn write_value_propositions(ctx: &mut WriterContext) {
    ctx.json.key("value_propositions");
    ctx.json.begin_array();
    for _ in 0..ctx.rng.between(1, 3) {
        ctx.json.begin_object();
        ctx.text_field("problem", |rng, s| {
            s.push_str(rng.word(PROBLEMS));
            s.push('.');
        });
        ctx.text_field("solution", |rng, s| {
            s.push_str(rng.word(SOLUTIONS));
            s.push('.');
        });
        ctx.text_field("icp", |rng, s| s.push_str(rng.word(AUDIENCES)));
        ctx.json.end_object();
    }
    ctx.json.end_array();
}
