//! Text tables: the one renderer of every table assay prints.
//!
//! A column is as wide as its widest cell, its heading included, and never
//! narrower than its minimum; a gap (two spaces unless the column says
//! otherwise) stands before every column but the first. Numbers are
//! aligned right, text left; the last column is not padded, and no line
//! ends in spaces. Widths count characters, as `format!`'s padding does.
//! Pure: it computes text and nothing else.

/// Which side of its column a cell keeps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// One column: its heading, alignment, minimum width and the gap before it.
#[derive(Debug, Clone)]
pub struct Column {
    heading: String,
    align: Align,
    min_width: usize,
    gap: &'static str,
}

/// A table being filled: rows of cells, and lines of text of their own
/// between them (a note under a row) that take no part in the columns.
#[derive(Debug, Clone)]
pub struct Table {
    columns: Vec<Column>,
    lines: Vec<Line>,
}

#[derive(Debug, Clone)]
enum Line {
    Row(Vec<String>),
    Text(String),
}

impl Column {
    /// A column of text, aligned left.
    pub fn left(heading: impl Into<String>) -> Column {
        Column::new(heading.into(), Align::Left)
    }

    /// A column of numbers, aligned right.
    pub fn right(heading: impl Into<String>) -> Column {
        Column::new(heading.into(), Align::Right)
    }

    fn new(heading: String, align: Align) -> Column {
        Column {
            heading,
            align,
            min_width: 0,
            gap: "  ",
        }
    }

    /// At least `width` characters wide, however narrow its cells.
    pub fn min_width(mut self, width: usize) -> Column {
        self.min_width = width;
        self
    }

    /// What stands between this column and the one before it.
    pub fn gap(mut self, gap: &'static str) -> Column {
        self.gap = gap;
        self
    }
}

impl Table {
    pub fn new(columns: Vec<Column>) -> Table {
        Table {
            columns,
            lines: Vec::new(),
        }
    }

    /// Adds a row, one cell per column; missing cells are empty, extra
    /// ones are dropped.
    pub fn row(&mut self, cells: impl IntoIterator<Item = String>) {
        let mut cells: Vec<String> = cells.into_iter().collect();
        cells.resize(self.columns.len(), String::new());
        self.lines.push(Line::Row(cells));
    }

    /// Adds a line of text of its own, printed as it is between the rows.
    pub fn text(&mut self, line: impl Into<String>) {
        self.lines.push(Line::Text(line.into()));
    }

    /// The heading line, then every row and text line in order, each
    /// ending in a newline.
    pub fn render(&self) -> String {
        let widths = self.widths();
        let headings: Vec<&str> = self.columns.iter().map(|c| c.heading.as_str()).collect();
        let mut out = self.render_row(&headings, &widths);
        for line in &self.lines {
            match line {
                Line::Row(cells) => {
                    let cells: Vec<&str> = cells.iter().map(String::as_str).collect();
                    out.push_str(&self.render_row(&cells, &widths));
                }
                Line::Text(text) => {
                    out.push_str(text);
                    out.push('\n');
                }
            }
        }
        out
    }

    fn widths(&self) -> Vec<usize> {
        let mut widths: Vec<usize> = self
            .columns
            .iter()
            .map(|c| c.min_width.max(width(&c.heading)))
            .collect();
        for line in &self.lines {
            if let Line::Row(cells) = line {
                for (w, cell) in widths.iter_mut().zip(cells) {
                    *w = (*w).max(width(cell));
                }
            }
        }
        widths
    }

    fn render_row(&self, cells: &[&str], widths: &[usize]) -> String {
        let mut line = String::new();
        let last = self.columns.len().saturating_sub(1);
        for (k, ((column, cell), w)) in self.columns.iter().zip(cells).zip(widths).enumerate() {
            if k > 0 {
                line.push_str(column.gap);
            }
            let pad = " ".repeat(w.saturating_sub(width(cell)));
            match column.align {
                Align::Right => {
                    line.push_str(&pad);
                    line.push_str(cell);
                }
                Align::Left if k == last => line.push_str(cell),
                Align::Left => {
                    line.push_str(cell);
                    line.push_str(&pad);
                }
            }
        }
        line.truncate(line.trim_end().len());
        line.push('\n');
        line
    }
}

/// A table of named rows (`compare`, `ladder`): the names in a column of
/// their own headed `corner`, then one right-aligned column per heading.
pub fn labelled(corner: &str, headings: &[String], rows: &[(&str, Vec<String>)]) -> String {
    let columns = std::iter::once(Column::left(corner))
        .chain(headings.iter().map(|h| Column::right(h.as_str())))
        .collect();
    let mut table = Table::new(columns);
    for (label, values) in rows {
        table.row(std::iter::once(label.to_string()).chain(values.iter().cloned()));
    }
    table.render()
}

/// A cell's width on a terminal, as `format!` pads: its characters.
fn width(text: &str) -> usize {
    text.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let text = labelled(
            "",
            &["a".into(), "batch 2".into()],
            &[
                ("x", vec!["1".into(), "22".into()]),
                ("long label", vec!["333".into(), "4".into()]),
            ],
        );
        assert_eq!(
            text,
            "              a  batch 2\n\
             x             1       22\n\
             long label  333        4\n"
        );
    }

    /// Issue 17: the `n` header sat three columns right of its values.
    #[test]
    fn batch_table_columns_line_up_with_their_headers() {
        let mut table = Table::new(vec![
            Column::right("batch"),
            Column::left("task"),
            Column::left("status"),
            Column::right("n"),
        ]);
        table.row(["1", "a-much-longer-task", "finished", "42"].map(String::from));
        table.row(["12", "t", "interrupted", "7"].map(String::from));
        let table = table.render();
        let lines: Vec<&str> = table.lines().collect();
        let end_of = |line: &str, word: &str| line.find(word).unwrap() + word.len();
        // Right-aligned numbers end where their header ends.
        assert_eq!(end_of(lines[0], " n"), lines[1].len());
        assert_eq!(lines[1].len(), lines[2].len());
        assert_eq!(end_of(lines[0], "batch"), end_of(lines[2], "12"));
        // Left-aligned text starts where its header starts.
        assert_eq!(lines[0].find("status"), lines[1].find("finished"));
        assert_eq!(lines[0].find("status"), lines[2].find("interrupted"));
    }

    #[test]
    fn a_minimum_width_holds_and_a_wider_cell_widens_its_column() {
        let mut table = Table::new(vec![
            Column::left("id").min_width(4),
            Column::right("n").min_width(3).gap(" "),
        ]);
        table.row(["a".into(), "1".into()]);
        assert_eq!(table.render(), "id     n\na      1\n");
        table.row(["abcdef".into(), "12345".into()]);
        assert_eq!(table.render(), "id         n\na          1\nabcdef 12345\n");
    }

    #[test]
    fn text_lines_stand_between_rows_as_they_are() {
        let mut table = Table::new(vec![Column::left("a"), Column::left("b")]);
        table.text("first  ");
        table.row(["x".into(), String::new()]);
        table.text("a note wider than every column");
        assert_eq!(
            table.render(),
            "a  b\nfirst  \nx\na note wider than every column\n"
        );
    }

    #[test]
    fn widths_count_characters_not_bytes() {
        let mut table = Table::new(vec![Column::left("pool"), Column::right("n")]);
        table.row(["café".into(), "1".into()]);
        table.row(["tea".into(), "22".into()]);
        assert_eq!(table.render(), "pool   n\ncafé   1\ntea   22\n");
    }
}
