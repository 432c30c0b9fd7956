#include "compiler/shape_tracker.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace baregpu::compiler {

int64_t numel(const Shape& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::string shape_string(const Shape& shape) { return fmt::format("({})", fmt::join(shape, ", ")); }

namespace {

std::vector<int64_t> row_major_strides(const Shape& shape) {
    std::vector<int64_t> strides(shape.size(), 0);
    int64_t s = 1;
    for (size_t d = shape.size(); d-- > 0;) {
        strides[d] = shape[d] == 1 ? 0 : s;  // size-1 dims never move: stride 0 keeps views canonical
        s *= shape[d];
    }
    return strides;
}

void check_rank(const View& v, size_t n, const char* what) {
    if (n != v.shape.size()) {
        throw std::invalid_argument(fmt::format("{}: {} entries given for a view of shape {} (rank {})", what, n, shape_string(v.shape),
                                                v.shape.size()));
    }
}

std::vector<std::pair<int64_t, int64_t>> full_mask(const View& v) {
    std::vector<std::pair<int64_t, int64_t>> m;
    for (size_t d = 0; d < v.shape.size(); ++d) m.push_back(v.mask_of(d));
    return m;
}

// Drop a mask that covers everything.
void normalize_mask(View& v) {
    bool all = true;
    for (size_t d = 0; d < v.mask.size(); ++d) all = all && v.mask[d].first <= 0 && v.mask[d].second >= v.shape[d];
    if (all) v.mask.clear();
}

}  // namespace

View View::contiguous(const Shape& shape) { return View{shape, row_major_strides(shape), 0, {}}; }

bool View::is_contiguous() const { return offset == 0 && mask.empty() && strides == row_major_strides(shape); }

std::string View::key() const {
    std::string k = fmt::format("v{}s{}o{}", shape_string(shape), shape_string(strides), offset);
    if (!mask.empty()) {
        k += "m";
        for (auto [b, e] : mask) k += fmt::format("[{},{})", b, e);
    }
    return k;
}

ShapeTracker ShapeTracker::contiguous(const Shape& shape) { return ShapeTracker({View::contiguous(shape)}); }

bool ShapeTracker::has_mask() const {
    return std::any_of(views_.begin(), views_.end(), [](const View& v) { return v.has_mask(); });
}

ShapeTracker ShapeTracker::reshape(const Shape& shape) const {
    if (numel(shape) != numel(this->shape())) {
        throw std::invalid_argument(fmt::format("reshape: {} has {} elements, {} has {}", shape_string(this->shape()),
                                                numel(this->shape()), shape_string(shape), numel(shape)));
    }
    for (int64_t d : shape) {
        if (d < 0) throw std::invalid_argument(fmt::format("reshape: negative dimension in {}", shape_string(shape)));
    }
    const View& last = views_.back();
    std::vector<View> views = views_;
    if (last.is_contiguous()) {
        views.back() = View::contiguous(shape);
        return ShapeTracker(std::move(views));
    }
    // Inserting or removing size-1 dims keeps strides and masks of the others.
    Shape a, b;
    for (int64_t d : last.shape) if (d != 1) a.push_back(d);
    for (int64_t d : shape) if (d != 1) b.push_back(d);
    bool ones_unmasked = true;
    for (size_t d = 0; d < last.shape.size(); ++d) {
        if (last.shape[d] == 1 && last.mask_of(d) != std::pair<int64_t, int64_t>{0, 1}) ones_unmasked = false;
    }
    if (a == b && ones_unmasked) {
        View v{shape, {}, last.offset, {}};
        std::vector<std::pair<int64_t, int64_t>> mask;
        size_t src = 0;
        for (int64_t d : shape) {
            if (d == 1) {
                v.strides.push_back(0);
                mask.emplace_back(0, 1);
                continue;
            }
            while (last.shape[src] == 1) ++src;
            v.strides.push_back(last.strides[src]);
            mask.push_back(last.mask_of(src));
            ++src;
        }
        if (last.has_mask()) v.mask = mask;
        normalize_mask(v);
        views.back() = v;
        return ShapeTracker(std::move(views));
    }
    views.push_back(View::contiguous(shape));
    return ShapeTracker(std::move(views));
}

ShapeTracker ShapeTracker::permute(const std::vector<int>& order) const {
    const View& last = views_.back();
    check_rank(last, order.size(), "permute");
    std::vector<bool> seen(order.size(), false);
    for (int o : order) {
        if (o < 0 || size_t(o) >= order.size() || seen[size_t(o)]) {
            throw std::invalid_argument(fmt::format("permute: ({}) is not a permutation of 0..{}", fmt::join(order, ", "), order.size() - 1));
        }
        seen[size_t(o)] = true;
    }
    View v{{}, {}, last.offset, {}};
    for (int o : order) {
        v.shape.push_back(last.shape[size_t(o)]);
        v.strides.push_back(last.strides[size_t(o)]);
        if (last.has_mask()) v.mask.push_back(last.mask[size_t(o)]);
    }
    std::vector<View> views = views_;
    views.back() = v;
    return ShapeTracker(std::move(views));
}

ShapeTracker ShapeTracker::expand(const Shape& shape) const {
    const View& last = views_.back();
    check_rank(last, shape.size(), "expand");
    View v = last;
    for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] == last.shape[d]) continue;
        if (last.shape[d] != 1) {
            throw std::invalid_argument(fmt::format("expand: dimension {} of {} is {}, not 1; cannot expand to {}", d,
                                                    shape_string(last.shape), last.shape[d], shape_string(shape)));
        }
        v.shape[d] = shape[d];
        v.strides[d] = 0;
        if (v.has_mask()) v.mask[d] = last.mask[d].second > last.mask[d].first ? std::pair<int64_t, int64_t>{0, shape[d]} : std::pair<int64_t, int64_t>{0, 0};
    }
    std::vector<View> views = views_;
    views.back() = v;
    return ShapeTracker(std::move(views));
}

ShapeTracker ShapeTracker::pad(const std::vector<std::pair<int64_t, int64_t>>& before_after) const {
    const View& last = views_.back();
    check_rank(last, before_after.size(), "pad");
    View v = last;
    v.mask = full_mask(last);
    for (size_t d = 0; d < before_after.size(); ++d) {
        auto [b, a] = before_after[d];
        if (b < 0 || a < 0) throw std::invalid_argument(fmt::format("pad: negative padding ({}, {}) on dimension {}", b, a, d));
        v.shape[d] += b + a;
        v.offset -= b * last.strides[d];
        v.mask[d] = {v.mask[d].first + b, v.mask[d].second + b};
    }
    normalize_mask(v);
    std::vector<View> views = views_;
    views.back() = v;
    return ShapeTracker(std::move(views));
}

ShapeTracker ShapeTracker::shrink(const std::vector<std::pair<int64_t, int64_t>>& begin_end) const {
    const View& last = views_.back();
    check_rank(last, begin_end.size(), "shrink");
    View v = last;
    v.mask = full_mask(last);
    for (size_t d = 0; d < begin_end.size(); ++d) {
        auto [b, e] = begin_end[d];
        if (b < 0 || e > last.shape[d] || b > e) {
            throw std::invalid_argument(fmt::format("shrink: [{}, {}) is not inside dimension {} of size {}", b, e, d, last.shape[d]));
        }
        v.shape[d] = e - b;
        v.offset += b * last.strides[d];
        v.mask[d] = {std::clamp(v.mask[d].first - b, int64_t{0}, e - b), std::clamp(v.mask[d].second - b, int64_t{0}, e - b)};
    }
    // A size-1 dim never moves the index (its start is in offset): stride 0 keeps views canonical.
    for (size_t d = 0; d < v.shape.size(); ++d) {
        if (v.shape[d] == 1) v.strides[d] = 0;
    }
    normalize_mask(v);
    std::vector<View> views = views_;
    views.back() = v;
    return ShapeTracker(std::move(views));
}

ShapeTracker ShapeTracker::flip(const std::vector<int>& axes) const {
    const View& last = views_.back();
    View v = last;
    for (int axis : axes) {
        if (axis < 0 || size_t(axis) >= last.shape.size()) {
            throw std::invalid_argument(fmt::format("flip: axis {} is outside rank {}", axis, last.shape.size()));
        }
        size_t d = size_t(axis);
        v.offset += (v.shape[d] - 1) * v.strides[d];
        v.strides[d] = -v.strides[d];
        if (v.has_mask()) v.mask[d] = {v.shape[d] - v.mask[d].second, v.shape[d] - v.mask[d].first};
    }
    std::vector<View> views = views_;
    views.back() = v;
    return ShapeTracker(std::move(views));
}

ShapeTracker ShapeTracker::windows(int64_t kh, int64_t kw) const {
    const Shape& in = shape();
    if (in.size() < 2 || kh < 1 || kw < 1 || kh > in[in.size() - 2] || kw > in.back()) {
        throw std::invalid_argument(fmt::format("windows: {}x{} windows do not fit the last two dims of {}", kh, kw, shape_string(in)));
    }
    const int64_t h = in[in.size() - 2], w = in.back();
    View v = View::contiguous(in);  // strides of the row-major flattening below
    Shape shape(in.begin(), in.end() - 2);
    std::vector<int64_t> strides(v.strides.begin(), v.strides.end() - 2);
    shape.insert(shape.end(), {h - kh + 1, w - kw + 1, kh, kw});
    strides.insert(strides.end(), {w, 1, w, 1});
    for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] == 1) strides[d] = 0;
    }
    View win{shape, strides, 0, {}};
    std::vector<View> views = views_;
    if (views.back().is_contiguous()) {
        views.back() = win;
    } else {
        views.push_back(win);
    }
    return ShapeTracker(std::move(views));
}

ShapeTracker ShapeTracker::on_top_of(const ShapeTracker& below) const {
    // Our first view indexes the row-major flattening of below's shape: a contiguous one of as
    // many elements is just a reshape of below, which may fold into its last view. One of fewer
    // (the first rows of it) stays a view of its own.
    size_t first = 0;
    std::vector<View> views = below.views_;
    if (views_[0].is_contiguous() && numel(views_[0].shape) == numel(below.shape())) {
        views = below.reshape(views_[0].shape).views_;
        first = 1;
    }
    views.insert(views.end(), views_.begin() + long(first), views_.end());
    return ShapeTracker(std::move(views));
}

std::string ShapeTracker::key() const {
    std::string k;
    for (const View& v : views_) k += v.key() + ";";
    return k;
}

}  // namespace baregpu::compiler
