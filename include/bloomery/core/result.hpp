#pragma once
// What an operation that can fail returns: its value, or why it failed, never
// both and never neither. The one result type of every layer, in place of a
// bool with a `std::string& error` out-parameter.
//
// The reason is a text for the one who must act on it: an operator (a file,
// an offset, what was expected) or a client. A client's text follows Redis's
// wording without the leading '-' ("ERR ...", "WRONGTYPE ..."), so the
// command layer writes it as an error reply as it is. Callers that must tell
// failures apart by kind, not by text, return an enum (or a Result of one)
// instead.
//
//   core::Result<Segment> open_segment(...);
//   auto segment = open_segment(...);
//   if (!segment) return core::Error{"cannot open " + path + ": " + segment.error()};
//   use(*segment);
//
//   core::Status sync();   // Result<void>: ok, or a reason
//   if (core::Status s = sync(); !s) log(s.error());

#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace bloomery::core {

// Why something failed (see the file comment). Implicitly converts into any
// Result, so a function returns `Error{"..."}` whatever its value type.
struct Error {
    std::string text;
};

template <class T>
class [[nodiscard]] Result {
    static_assert(!std::is_same_v<std::remove_cv_t<T>, Error>, "a Result of an Error");

public:
    Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}      // NOLINT: implicit
    Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT: implicit

    bool ok() const { return state_.index() == 0; }
    explicit operator bool() const { return ok(); }

    // The value; only when ok().
    T& value() & { return std::get<0>(state_); }
    const T& value() const& { return std::get<0>(state_); }
    T&& value() && { return std::get<0>(std::move(state_)); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    // The reason; only when !ok().
    const std::string& error() const { return std::get<1>(state_).text; }
    // The failure as it is, to pass on unchanged (`return r.failure();`).
    Error failure() const& { return std::get<1>(state_); }
    Error failure() && { return std::get<1>(std::move(state_)); }

private:
    std::variant<T, Error> state_;
};

// Success with nothing to return, or a reason.
template <>
class [[nodiscard]] Result<void> {
public:
    Result() = default;                                                    // ok
    Result(Error error) : error_(std::move(error.text)), failed_(true) {}  // NOLINT: implicit

    bool ok() const { return !failed_; }
    explicit operator bool() const { return ok(); }
    const std::string& error() const { return error_; }
    Error failure() const { return Error{error_}; }

private:
    std::string error_;
    bool failed_ = false;
};

using Status = Result<void>;

}  // namespace bloomery::core
