//! A BDDL (LIBERO's task language) reader: an s-expression tokenizer that keeps
//! line numbers, and a converter from the `(define (problem ...))` form into a
//! [`Scene`]. Unknown object types are kept (the check command warns about them).

use super::{Entity, Predicate, Region, Scene};
use crate::error::{Result, SimError};

/// An s-expression node with the line it starts on.
#[derive(Debug, Clone)]
enum Sexp {
    Atom(String, usize),
    List(Vec<Sexp>, usize),
}

impl Sexp {
    fn line(&self) -> usize {
        match self {
            Sexp::Atom(_, l) | Sexp::List(_, l) => *l,
        }
    }
    fn atom(&self) -> Option<&str> {
        match self {
            Sexp::Atom(s, _) => Some(s),
            Sexp::List(..) => None,
        }
    }
    fn list(&self) -> Option<&[Sexp]> {
        match self {
            Sexp::List(v, _) => Some(v),
            Sexp::Atom(..) => None,
        }
    }
    /// The keyword heading a list, e.g. `:regions`.
    fn head(&self) -> Option<&str> {
        self.list().and_then(|v| v.first()).and_then(Sexp::atom)
    }
}

struct Parser<'a> {
    file: &'a str,
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: usize,
}

impl Parser<'_> {
    fn err(&self, line: usize, message: impl Into<String>) -> SimError {
        SimError::Parse {
            file: self.file.to_string(),
            line,
            column: 0,
            message: message.into(),
        }
    }

    fn skip_ws(&mut self) {
        while let Some(&c) = self.chars.peek() {
            if c == '\n' {
                self.line += 1;
                self.chars.next();
            } else if c.is_whitespace() {
                self.chars.next();
            } else if c == ';' {
                while let Some(&c) = self.chars.peek() {
                    if c == '\n' {
                        break;
                    }
                    self.chars.next();
                }
            } else {
                break;
            }
        }
    }

    fn parse(&mut self) -> Result<Sexp> {
        self.skip_ws();
        let line = self.line;
        match self.chars.peek() {
            None => Err(self.err(line, "unexpected end of file, expected an expression")),
            Some(')') => Err(self.err(line, "unexpected `)`, expected an atom or `(`")),
            Some('(') => {
                self.chars.next();
                let mut items = Vec::new();
                loop {
                    self.skip_ws();
                    match self.chars.peek() {
                        None => {
                            return Err(self.err(
                                line,
                                "unclosed `(` opened here, expected `)` before end of file",
                            ));
                        }
                        Some(')') => {
                            self.chars.next();
                            return Ok(Sexp::List(items, line));
                        }
                        Some(_) => items.push(self.parse()?),
                    }
                }
            }
            Some(_) => {
                let mut s = String::new();
                while let Some(&c) = self.chars.peek() {
                    if c.is_whitespace() || c == '(' || c == ')' || c == ';' {
                        break;
                    }
                    s.push(c);
                    self.chars.next();
                }
                Ok(Sexp::Atom(s, line))
            }
        }
    }
}

/// Parses a LIBERO BDDL problem into a [`Scene`]; `name` becomes the scene name.
pub fn parse_bddl(text: &str, file: &str, name: &str) -> Result<Scene> {
    let mut p = Parser {
        file,
        chars: text.chars().peekable(),
        line: 1,
    };
    let root = p.parse()?;
    p.skip_ws();
    if p.chars.peek().is_some() {
        return Err(p.err(
            p.line,
            "trailing text after the `(define ...)` form, expected end of file",
        ));
    }
    let items = root
        .list()
        .filter(|v| v.first().and_then(Sexp::atom) == Some("define"))
        .ok_or_else(|| p.err(root.line(), "expected `(define (problem NAME) ...)`"))?;
    let mut scene = Scene {
        name: name.to_string(),
        problem: String::new(),
        language: String::new(),
        init: Vec::new(),
        goal: Vec::new(),
        fixtures: Vec::new(),
        objects: Vec::new(),
        regions: Vec::new(),
        object_types: Vec::new(),
    };
    for item in &items[1..] {
        let Some(list) = item.list() else {
            return Err(p.err(item.line(), "expected a `(:section ...)` list"));
        };
        match item.head().unwrap_or("") {
            "problem" => {
                scene.problem = list
                    .get(1)
                    .and_then(Sexp::atom)
                    .ok_or_else(|| p.err(item.line(), "expected `(problem NAME)`"))?
                    .to_string();
            }
            ":language" => {
                let words: Vec<&str> = list[1..].iter().filter_map(Sexp::atom).collect();
                scene.language = words.join(" ");
            }
            ":regions" => {
                for r in &list[1..] {
                    scene.regions.push(region(&p, r)?);
                }
            }
            ":fixtures" => scene.fixtures = typed_names(&p, &list[1..])?,
            ":objects" => scene.objects = typed_names(&p, &list[1..])?,
            ":init" => {
                for e in &list[1..] {
                    scene.init.push(predicate(&p, e)?);
                }
            }
            ":goal" => {
                for g in &list[1..] {
                    if g.head().is_some_and(|h| h.eq_ignore_ascii_case("and")) {
                        for e in &g.list().unwrap_or_default()[1..] {
                            scene.goal.push(predicate(&p, e)?);
                        }
                    } else {
                        scene.goal.push(predicate(&p, g)?);
                    }
                }
            }
            // :domain, :obj_of_interest and other sections carry nothing we simulate.
            _ => {}
        }
    }
    if scene.problem.is_empty() {
        return Err(p.err(root.line(), "missing `(problem NAME)`"));
    }
    Ok(scene)
}

fn typed_names(p: &Parser, atoms: &[Sexp]) -> Result<Vec<Entity>> {
    let mut out = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    let mut i = 0;
    while i < atoms.len() {
        let a = atoms[i]
            .atom()
            .ok_or_else(|| p.err(atoms[i].line(), "expected `name - type` entries"))?;
        if a == "-" {
            let kind = atoms
                .get(i + 1)
                .and_then(Sexp::atom)
                .ok_or_else(|| p.err(atoms[i].line(), "expected a type name after `-`"))?;
            if pending.is_empty() {
                return Err(p.err(atoms[i].line(), "expected a name before `- type`"));
            }
            for name in pending.drain(..) {
                out.push(Entity {
                    name,
                    kind: kind.to_string(),
                });
            }
            i += 2;
        } else {
            pending.push(a.to_string());
            i += 1;
        }
    }
    if let Some(name) = pending.first() {
        return Err(p.err(
            atoms.last().map_or(0, Sexp::line),
            format!("`{name}` has no type, expected `{name} - TYPE`"),
        ));
    }
    Ok(out)
}

fn numbers(p: &Parser, e: &Sexp, n: usize) -> Result<Vec<f64>> {
    let list = e
        .list()
        .ok_or_else(|| p.err(e.line(), format!("expected a list of {n} numbers")))?;
    if list.len() != n {
        return Err(p.err(
            e.line(),
            format!("expected {n} numbers, found {}", list.len()),
        ));
    }
    list.iter()
        .map(|x| {
            x.atom().and_then(|s| s.parse::<f64>().ok()).ok_or_else(|| {
                p.err(
                    x.line(),
                    format!("expected a number, found `{}`", x.atom().unwrap_or("(...)")),
                )
            })
        })
        .collect()
}

fn region(p: &Parser, e: &Sexp) -> Result<Region> {
    let list = e
        .list()
        .filter(|l| !l.is_empty())
        .ok_or_else(|| p.err(e.line(), "expected `(region_name (:target T) ...)`"))?;
    let name = list[0]
        .atom()
        .ok_or_else(|| p.err(e.line(), "expected a region name"))?
        .to_string();
    let mut region = Region {
        name,
        target: String::new(),
        ranges: Vec::new(),
        yaw: None,
    };
    for field in &list[1..] {
        let fl = field.list().unwrap_or_default();
        match field.head().unwrap_or("") {
            ":target" => {
                region.target = fl
                    .get(1)
                    .and_then(Sexp::atom)
                    .ok_or_else(|| p.err(field.line(), "expected `(:target NAME)`"))?
                    .to_string();
            }
            ":ranges" => {
                let inner = fl.get(1).and_then(Sexp::list).ok_or_else(|| {
                    p.err(
                        field.line(),
                        "expected `(:ranges ((x_min y_min x_max y_max) ...))`",
                    )
                })?;
                for r in inner {
                    let v = numbers(p, r, 4)?;
                    region.ranges.push([v[0], v[1], v[2], v[3]]);
                }
            }
            ":yaw_rotation" => {
                let inner = fl
                    .get(1)
                    .and_then(Sexp::list)
                    .ok_or_else(|| p.err(field.line(), "expected `(:yaw_rotation ((min max)))`"))?;
                if let Some(r) = inner.first() {
                    let v = numbers(p, r, 2)?;
                    region.yaw = Some([v[0], v[1]]);
                }
            }
            // `:rotation` and friends (other suites): not used by the simulator.
            _ => {}
        }
    }
    if region.target.is_empty() {
        return Err(p.err(
            e.line(),
            format!("region `{}` has no `(:target NAME)`", region.name),
        ));
    }
    Ok(region)
}

fn predicate(p: &Parser, e: &Sexp) -> Result<Predicate> {
    let list = e
        .list()
        .filter(|l| !l.is_empty())
        .ok_or_else(|| p.err(e.line(), "expected a predicate `(Name arg ...)`"))?;
    let name = list[0]
        .atom()
        .ok_or_else(|| p.err(e.line(), "expected a predicate name"))?;
    let args = list[1..]
        .iter()
        .map(|a| {
            a.atom()
                .map(str::to_string)
                .ok_or_else(|| p.err(a.line(), "expected an atom argument"))
        })
        .collect::<Result<Vec<_>>>()?;
    Predicate::new(name, args).map_err(|m| p.err(e.line(), m))
}
