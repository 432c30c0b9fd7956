// A plain, obviously-correct host implementation of the Tensor ops (doubles, row-major,
// explicit index loops) that the compiled kernels are checked against.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <random>
#include <stdexcept>
#include <vector>

namespace baregpu::test {

using RefShape = std::vector<int64_t>;

struct Ref {
    RefShape shape;
    std::vector<double> v;

    static int64_t count(const RefShape& s) {
        int64_t n = 1;
        for (int64_t d : s) n *= d;
        return n;
    }
    static Ref filled(RefShape s, double x) { return {s, std::vector<double>(size_t(count(s)), x)}; }
    static Ref random(RefShape s, std::mt19937& gen, double lo, double hi) {
        std::uniform_real_distribution<float> dist{float(lo), float(hi)};
        Ref r = filled(std::move(s), 0);
        for (double& x : r.v) x = double(dist(gen));  // float-representable values
        return r;
    }
    static Ref random_int(RefShape s, std::mt19937& gen, int lo, int hi) {
        std::uniform_int_distribution<int> dist(lo, hi);
        Ref r = filled(std::move(s), 0);
        for (double& x : r.v) x = dist(gen);
        return r;
    }

    std::vector<int64_t> unravel(int64_t flat) const {
        std::vector<int64_t> idx(shape.size());
        for (size_t d = shape.size(); d-- > 0;) {
            idx[d] = flat % shape[d];
            flat /= shape[d];
        }
        return idx;
    }
    // An index as a vector or a braced list (at({b, c, i, j}): the list lives on the stack, no
    // allocation per element in the reference convolution's inner loop).
    template <typename Index>
    int64_t ravel(const Index& idx) const {
        int64_t f = 0;
        auto it = idx.begin();
        for (size_t d = 0; d < shape.size(); ++d, ++it) f = f * shape[d] + *it;
        return f;
    }
    int64_t ravel(std::initializer_list<int64_t> idx) const { return ravel<std::initializer_list<int64_t>>(idx); }
    double at(const std::vector<int64_t>& idx) const { return v[size_t(ravel(idx))]; }
    double at(std::initializer_list<int64_t> idx) const { return v[size_t(ravel(idx))]; }

    std::vector<float> floats() const { return {v.begin(), v.end()}; }
    std::vector<int32_t> ints() const {
        std::vector<int32_t> out;
        for (double x : v) out.push_back(int32_t(x));
        return out;
    }

    // Steps idx to the next row-major index of this shape (the last axis fastest): the loops below
    // walk their indices in place, because an index vector made per element is most of their time
    // under ASan.
    void next(std::vector<int64_t>& idx) const {
        for (size_t d = idx.size(); d-- > 0;) {
            if (++idx[d] < shape[d]) return;
            idx[d] = 0;
        }
    }

    // out[idx] = src[map(idx)] (nullopt-like: map returns false for padding -> 0).
    Ref gather(RefShape out_shape, const std::function<bool(const std::vector<int64_t>&, std::vector<int64_t>&)>& map) const {
        Ref r = filled(std::move(out_shape), 0);
        std::vector<int64_t> idx(r.shape.size(), 0), src;
        for (size_t i = 0; i < r.v.size(); ++i, r.next(idx))
            if (map(idx, src)) r.v[i] = at(src);
        return r;
    }

    Ref map(const std::function<double(double)>& f) const {
        Ref r = *this;
        for (double& x : r.v) x = f(x);
        return r;
    }

    Ref broadcast_to(const RefShape& s) const {
        return gather(s, [&](const std::vector<int64_t>& idx, std::vector<int64_t>& src) {
            src.assign(shape.size(), 0);
            for (size_t i = 0; i < shape.size(); ++i) {
                size_t d = s.size() - shape.size() + i;
                src[i] = shape[i] == 1 ? 0 : idx[d];
            }
            return true;
        });
    }

    static RefShape broadcast_shape(const RefShape& a, const RefShape& b) {
        RefShape out(std::max(a.size(), b.size()), 1);
        for (size_t i = 0; i < out.size(); ++i) {
            int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1, db = i < b.size() ? b[b.size() - 1 - i] : 1;
            out[out.size() - 1 - i] = da == 1 ? db : da;
        }
        return out;
    }

    static Ref zip(const Ref& a, const Ref& b, const std::function<double(double, double)>& f) {
        RefShape s = broadcast_shape(a.shape, b.shape);
        Ref x = a.broadcast_to(s), y = b.broadcast_to(s);
        for (size_t i = 0; i < x.v.size(); ++i) x.v[i] = f(x.v[i], y.v[i]);
        return x;
    }

    // Reduce over `axes` keeping them as size 1.
    Ref reduce(const std::vector<int>& axes, double init, const std::function<double(double, double)>& f) const {
        RefShape out = shape;
        for (int a : axes) out[size_t(a)] = 1;
        Ref r = filled(out, init);
        std::vector<int64_t> idx(shape.size(), 0), kept;
        for (size_t i = 0; i < v.size(); ++i, next(idx)) {
            kept = idx;
            for (int a : axes) kept[size_t(a)] = 0;
            double& acc = r.v[size_t(r.ravel(kept))];
            acc = f(acc, v[i]);
        }
        return r;
    }

    Ref reshape(RefShape s) const { return {std::move(s), v}; }
    Ref permute(const std::vector<int>& order) const {
        RefShape s;
        for (int o : order) s.push_back(shape[size_t(o)]);
        return gather(s, [&](const std::vector<int64_t>& idx, std::vector<int64_t>& src) {
            src.assign(shape.size(), 0);
            for (size_t d = 0; d < order.size(); ++d) src[size_t(order[d])] = idx[d];
            return true;
        });
    }
    Ref pad(const std::vector<std::pair<int64_t, int64_t>>& p) const {
        RefShape s = shape;
        for (size_t d = 0; d < s.size(); ++d) s[d] += p[d].first + p[d].second;
        return gather(s, [&](const std::vector<int64_t>& idx, std::vector<int64_t>& src) {
            src = idx;
            for (size_t d = 0; d < idx.size(); ++d) {
                src[d] = idx[d] - p[d].first;
                if (src[d] < 0 || src[d] >= shape[d]) return false;
            }
            return true;
        });
    }
    Ref shrink(const std::vector<std::pair<int64_t, int64_t>>& r) const {
        RefShape s;
        for (auto [b, e] : r) s.push_back(e - b);
        return gather(s, [&](const std::vector<int64_t>& idx, std::vector<int64_t>& src) {
            src = idx;
            for (size_t d = 0; d < idx.size(); ++d) src[d] += r[d].first;
            return true;
        });
    }
    Ref flip(const std::vector<int>& axes) const {
        return gather(shape, [&](const std::vector<int64_t>& idx, std::vector<int64_t>& src) {
            src = idx;
            for (int a : axes) src[size_t(a)] = shape[size_t(a)] - 1 - idx[size_t(a)];
            return true;
        });
    }
    static Ref matmul(const Ref& a, const Ref& b) {
        int64_t m = a.shape[0], k = a.shape[1], n = b.shape[1];
        Ref r = filled({m, n}, 0);
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                double s = 0;
                for (int64_t q = 0; q < k; ++q) s += a.v[size_t(i * k + q)] * b.v[size_t(q * n + j)];
                r.v[size_t(i * n + j)] = s;
            }
        return r;
    }
};

}  // namespace baregpu::test
