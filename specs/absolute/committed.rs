// Committed candidate of the `absolute` task: deliberately imperfect.
// It splits both auto margins equally even when that makes them negative
// (no ltr/rtl fallback) and resolves every over-constrained case by
// ignoring `right`, also in rtl. It scores 231/269 on cases.jsonl.

fn px(len: Length) -> Option<f64> {
    match len {
        Length::Auto => None,
        Length::Px(v) => Some(v),
    }
}

fn solve(input: &Input, width: Option<f64>) -> Output {
    let cw = input.containing_width;
    let ltr = input.direction == Direction::Ltr;
    let boxes = input.padding_left + input.padding_right + input.border_left + input.border_right;
    let left = px(input.left);
    let right = px(input.right);
    let ml = px(input.margin_left);
    let mr = px(input.margin_right);
    let shrink = |available: f64| available.max(input.preferred_min_width).min(input.preferred_width);

    match (left, width, right) {
        (None, None, None) => {
            let ml = ml.unwrap_or(0.0);
            let mr = mr.unwrap_or(0.0);
            if ltr {
                let left = input.static_left;
                let width = shrink(cw - left - ml - mr - boxes);
                let right = cw - left - ml - mr - boxes - width;
                Output { left, width, right, margin_left: ml, margin_right: mr }
            } else {
                let right = input.static_right;
                let width = shrink(cw - right - ml - mr - boxes);
                let left = cw - right - ml - mr - boxes - width;
                Output { left, width, right, margin_left: ml, margin_right: mr }
            }
        }
        (Some(left), Some(width), Some(right)) => {
            let rest = cw - left - right - width - boxes;
            let (ml, mr, left, right) = match (ml, mr) {
                (None, None) => {
                    (rest / 2.0, rest / 2.0, left, right)
                }
                (None, Some(mr)) => (rest - mr, mr, left, right),
                (Some(ml), None) => (ml, rest - ml, left, right),
                (Some(ml), Some(mr)) => (ml, mr, left, right + rest - ml - mr),
            };
            Output { left, width, right, margin_left: ml, margin_right: mr }
        }
        _ => {
            let ml = ml.unwrap_or(0.0);
            let mr = mr.unwrap_or(0.0);
            let space = cw - ml - mr - boxes;
            let (l, w, r) = match (left, width, right) {
                (None, None, Some(r)) => {
                    let w = shrink(space - r);
                    (space - r - w, w, r)
                }
                (None, Some(w), None) => {
                    if ltr {
                        let l = input.static_left;
                        (l, w, space - l - w)
                    } else {
                        let r = input.static_right;
                        (space - r - w, w, r)
                    }
                }
                (Some(l), None, None) => {
                    let w = shrink(space - l);
                    (l, w, space - l - w)
                }
                (None, Some(w), Some(r)) => (space - r - w, w, r),
                (Some(l), None, Some(r)) => (l, space - l - r, r),
                (Some(l), Some(w), None) => (l, w, space - l - w),
                _ => unreachable!(),
            };
            Output { left: l, width: w, right: r, margin_left: ml, margin_right: mr }
        }
    }
}

pub fn absolute_width(input: &Input) -> Output {
    let tentative = solve(input, px(input.width));
    if tentative.width < 0.0 {
        solve(input, Some(0.0))
    } else {
        tentative
    }
}
