//! The timeline SVG (`-o svg`) as the tests read it: parsed by a real XML parser, its elements
//! found by their class (`bar`, `mark`, `lane`, …) and their hover text.
#![allow(dead_code)]

use roxmltree::{Document, Node};

pub fn parse(svg: &str) -> Document<'_> {
    Document::parse(svg).unwrap_or_else(|e| panic!("the SVG is not well-formed: {e}"))
}

/// The elements whose `class` has the word `class`, in document order.
pub fn with_class<'a, 'i>(doc: &'a Document<'i>, class: &str) -> Vec<Node<'a, 'i>> {
    doc.descendants()
        .filter(|n| {
            n.attribute("class")
                .is_some_and(|a| a.split(' ').any(|w| w == class))
        })
        .collect()
}

/// An element's `<title>`: its hover text (the document's own, for the root).
pub fn title_of<'a>(node: Node<'a, '_>) -> &'a str {
    node.children()
        .find(|c| c.has_tag_name("title"))
        .and_then(|t| t.text())
        .unwrap_or("")
}
