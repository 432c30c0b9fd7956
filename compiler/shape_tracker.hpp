// Views: how a logical N-d index maps to an element of the storage below it. Movement ops
// (reshape, permute, expand, pad, shrink, flip) only edit views, so they cost nothing at run
// time; the code generator folds the views of each load into index arithmetic.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace baregpu::compiler {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& shape);
std::string shape_string(const Shape& shape);

// One affine view. Index idx (0 <= idx[d] < shape[d]) is valid when mask[d].first <= idx[d] <
// mask[d].second for every d (an empty mask: always valid); a valid index reads element
// offset + sum(idx[d] * strides[d]) of what lies below, an invalid one reads 0 (padding).
struct View {
    Shape shape;
    std::vector<int64_t> strides;  // in elements; 0 for broadcast dimensions, negative when flipped
    int64_t offset = 0;            // in elements
    std::vector<std::pair<int64_t, int64_t>> mask;

    static View contiguous(const Shape& shape);
    bool is_contiguous() const;  // row-major strides, offset 0, no mask
    bool has_mask() const { return !mask.empty(); }
    std::pair<int64_t, int64_t> mask_of(size_t dim) const { return mask.empty() ? std::pair<int64_t, int64_t>{0, shape[dim]} : mask[dim]; }
    std::string key() const;
};

// A stack of views, the first nearest the storage. A view above the first indexes the
// row-major flattening of the one below (a reshape that strides cannot express pushes a view).
class ShapeTracker {
public:
    ShapeTracker() = default;
    static ShapeTracker contiguous(const Shape& shape);

    const Shape& shape() const { return views_.back().shape; }
    const std::vector<View>& views() const { return views_; }
    bool is_contiguous() const { return views_.size() == 1 && views_[0].is_contiguous(); }
    bool has_mask() const;

    // Each throws std::invalid_argument naming the expected and the given shape or axes.
    ShapeTracker reshape(const Shape& shape) const;
    ShapeTracker permute(const std::vector<int>& order) const;
    ShapeTracker expand(const Shape& shape) const;  // dims of size 1 broadcast to the new size
    ShapeTracker pad(const std::vector<std::pair<int64_t, int64_t>>& before_after) const;
    ShapeTracker shrink(const std::vector<std::pair<int64_t, int64_t>>& begin_end) const;
    ShapeTracker flip(const std::vector<int>& axes) const;
    // Sliding windows over the last two dims: (..., H, W) -> (..., H-KH+1, W-KW+1, KH, KW),
    // element [..., i, j, a, b] = [..., i + a, j + b] (stride 1). Overlapping strides over the
    // row-major flattening of the current view: masks below stay exact.
    ShapeTracker windows(int64_t kh, int64_t kw) const;

    // This tracker applied on top of `below` (which maps this tracker's storage to the real one).
    ShapeTracker on_top_of(const ShapeTracker& below) const;

    std::string key() const;

private:
    explicit ShapeTracker(std::vector<View> views) : views_(std::move(views)) {}
    std::vector<View> views_;
};

}  // namespace baregpu::compiler
