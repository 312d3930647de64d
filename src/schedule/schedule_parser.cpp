#include "schedule/schedule_parser.h"

#include <cctype>
#include <fstream>
#include <regex>
#include <sstream>

#include "support/error.h"

namespace loom {

std::string check_call_form(const PrimitiveCall &call, int stage) {
    const PrimitiveInfo *p = find_primitive(call.name);
    if (!p) {
        std::string hint = did_you_mean(call.name, primitive_names());
        if (hint.empty()) {
            std::string all;
            for (const auto &n : primitive_names()) all += (all.empty() ? "" : " ") + n;
            hint = "; primitives are: " + all;
        }
        return "unknown primitive '" + call.name + "'" + hint;
    }
    int n = (int)call.args.size();
    if (n < p->min_args || (p->max_args >= 0 && n > p->max_args))
        return call.name + " takes " +
               (p->min_args == p->max_args ? std::to_string(p->min_args)
                : p->max_args < 0          ? "at least " + std::to_string(p->min_args)
                                           : std::to_string(p->min_args) + " to " +
                                        std::to_string(p->max_args)) +
               " arguments, not " + std::to_string(n) + "; expected " + p->signature;
    if (call.name == "rfactor" && n % 2 != 0)
        return "rfactor takes pairs (rvar, new var), not " + std::to_string(n) +
               " arguments; expected " + p->signature;
    if (p->makes_func && call.as_name.empty())
        return call.name + " makes a new Func: name it, `" + call.name + "(…) as <name>`";
    if (!p->makes_func && !call.as_name.empty())
        return call.name + " makes no new Func, so `as " + call.as_name +
               "` has nothing to name; only rfactor and in take `as <name>`";
    if (p->pure_only && stage >= 0)
        return call.name + " schedules the whole Func, not one update stage; write it on the Func: "
                           "`<func>." + call.name + "(…)`";
    if (call.name == "rfactor" && stage < 0)
        return "rfactor applies to an update stage: `<func>.update(k).rfactor(r.x, u) as <name>`";
    return "";
}

namespace {

enum class Tok { Ident, Int, Punct, Comment, Blank, End };

struct Token {
    Tok kind;
    std::string text;
    int64_t value = 0;
    int line = 0, col = 0;
};

// Tokens plus comment and blank-line markers, so the parser can attach comments to statements.
std::vector<Token> lex(const std::string &src, const std::string &file) {
    std::vector<Token> out;
    int line = 1, col = 1;
    size_t i = 0;
    bool line_has_content = false;
    auto err = [&](const std::string &msg) {
        throw UserError(file + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + msg);
    };
    while (i < src.size()) {
        char c = src[i];
        if (c == '\n') {
            if (!line_has_content) out.push_back({Tok::Blank, "", 0, line, col});
            line++, col = 1, i++;
            line_has_content = false;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r') {
            i++, col++;
            continue;
        }
        line_has_content = true;
        int tl = line, tc = col;
        if (c == '#' || (c == '/' && i + 1 < src.size() && src[i + 1] == '/')) {
            size_t start = i + (c == '#' ? 1 : 2);
            size_t end = src.find('\n', start);
            if (end == std::string::npos) end = src.size();
            std::string text = src.substr(start, end - start);
            if (!text.empty() && text[0] == ' ') text.erase(0, 1);
            while (!text.empty() && (text.back() == ' ' || text.back() == '\r' || text.back() == '\t'))
                text.pop_back();
            out.push_back({Tok::Comment, text, 0, tl, tc});
            col += (int)(end - i);
            i = end;
            continue;
        }
        if (std::isalpha((unsigned char)c) || c == '_') {
            size_t j = i;
            while (j < src.size() && (std::isalnum((unsigned char)src[j]) || src[j] == '_')) j++;
            out.push_back({Tok::Ident, src.substr(i, j - i), 0, tl, tc});
            col += (int)(j - i), i = j;
            continue;
        }
        if (std::isdigit((unsigned char)c)) {
            size_t j = i;
            while (j < src.size() && std::isdigit((unsigned char)src[j])) j++;
            if (j < src.size() && (std::isalpha((unsigned char)src[j]) || src[j] == '_'))
                err("a name cannot start with a digit: '" + src.substr(i, j - i + 1) + "…'");
            std::string digits = src.substr(i, j - i);
            if (digits.size() > 18) err("integer " + digits + " is too large");
            out.push_back({Tok::Int, digits, std::stoll(digits), tl, tc});
            col += (int)(j - i), i = j;
            continue;
        }
        if (c == ':' && i + 1 < src.size() && src[i + 1] == ':') {
            out.push_back({Tok::Punct, "::", 0, tl, tc});
            i += 2, col += 2;
            continue;
        }
        if (std::string("().,;-").find(c) != std::string::npos) {
            out.push_back({Tok::Punct, std::string(1, c), 0, tl, tc});
            i++, col++;
            continue;
        }
        err(std::string("unexpected character '") + c +
            "'; a schedule holds `func.primitive(args)…;` statements and # comments");
    }
    out.push_back({Tok::End, "", 0, line, col});
    return out;
}

std::string describe(const Token &t) {
    switch (t.kind) {
    case Tok::End: return "end of file";
    case Tok::Int: return "'" + t.text + "'";
    case Tok::Comment: return "a comment";
    default: return "'" + t.text + "'";
    }
}

// The phrase must end the comment, so a sentence that mentions it is not read as the header.
static const std::regex &header_line_regex() {
    static const std::regex re(R"(loom schedule for (\S+)(?: \(sha256 ([^)\s]*)\))?(?: on (\S+))?\s*$)");
    return re;
}

class Parser {
public:
    Parser(std::vector<Token> toks, std::string file) : toks_(std::move(toks)), file_(std::move(file)) {}

    Schedule run() {
        Schedule s;
        s.file = file_;
        std::vector<std::string> pending;
        bool header_done = false;
        while (true) {
            const Token &t = toks_[pos_];
            if (t.kind == Tok::Comment) {
                pending.push_back(t.text);
                pos_++;
            } else if (t.kind == Tok::Blank) {
                if (!header_done && !pending.empty()) {
                    take_header(s, pending);
                    header_done = true;
                }
                pos_++;
            } else if (t.kind == Tok::End) {
                if (!header_done && s.statements.empty()) take_header(s, pending);
                else s.trailing_comments = pending;
                return s;
            } else {
                if (!header_done && has_loom_line(pending)) take_header(s, pending);
                header_done = true;
                ScheduleStatement st = statement();
                st.comments.insert(st.comments.begin(), pending.begin(), pending.end());
                pending.clear();
                s.statements.push_back(std::move(st));
            }
        }
    }

private:
    std::vector<Token> toks_;
    std::string file_;
    size_t pos_ = 0;
    std::vector<std::string> inner_comments_;

    static bool has_loom_line(const std::vector<std::string> &lines) {
        for (const auto &l : lines)
            if (is_schedule_header_line(l)) return true;
        return false;
    }
    static void take_header(Schedule &s, std::vector<std::string> &lines) {
        bool found = false;
        for (const auto &l : lines) {
            std::smatch m;
            if (!found && std::regex_search(l, m, header_line_regex())) {
                found = true;
                s.model = m[1] == "<unknown>" ? "" : m[1].str();
                s.sha256 = m[2].str();
                s.target = m[3].str();
            } else {
                s.header_comments.push_back(l);
            }
        }
        lines.clear();
    }

    [[noreturn]] void fail(const Token &t, const std::string &msg) {
        throw UserError(file_ + ":" + std::to_string(t.line) + ":" + std::to_string(t.col) + ": " +
                        msg);
    }
    // Next significant token (comments inside a statement are collected, blank lines skipped).
    const Token &peek() {
        while (toks_[pos_].kind == Tok::Comment || toks_[pos_].kind == Tok::Blank) {
            if (toks_[pos_].kind == Tok::Comment) inner_comments_.push_back(toks_[pos_].text);
            pos_++;
        }
        return toks_[pos_];
    }
    const Token &next() {
        const Token &t = peek();
        pos_++;
        return t;
    }
    bool is(const Token &t, const char *punct) { return t.kind == Tok::Punct && t.text == punct; }
    const Token &expect(const char *punct, const std::string &what) {
        const Token &t = peek();
        if (!is(t, punct)) fail(t, "expected '" + std::string(punct) + "' " + what + ", found " + describe(t));
        return next();
    }
    const Token &expect_ident(const std::string &what) {
        const Token &t = peek();
        if (t.kind != Tok::Ident) fail(t, "expected " + what + ", found " + describe(t));
        return next();
    }

    ScheduleStatement statement() {
        inner_comments_.clear();
        const Token &name = peek();
        if (name.kind != Tok::Ident)
            fail(name, "expected a func name to start a statement `func.primitive(args);`, found " +
                           describe(name));
        next();
        ScheduleStatement st(name.text);
        st.loc = {file_, name.line, name.col};
        if (!is(peek(), ".")) fail(peek(), "expected '.' and a primitive after '" + name.text + "', found " + describe(peek()));
        // Optional .update(k) directly after the name.
        if (toks_[pos_ + 1].kind == Tok::Ident && toks_[pos_ + 1].text == "update") {
            next();
            next();
            expect("(", "after update");
            const Token &k = peek();
            if (k.kind != Tok::Int) fail(k, "expected the update stage index in update(k), found " + describe(k));
            st.stage = (int)next().value;
            expect(")", "to close update(" + std::to_string(st.stage) + ")");
        }
        if (!is(peek(), "."))
            fail(peek(), "expected '.' and a primitive after '" + st.stage_name() + "', found " + describe(peek()));
        while (is(peek(), ".")) {
            next();
            st.calls.push_back(call(st));
        }
        const Token &end = peek();
        if (!is(end, ";")) {
            std::string msg = "expected ';' to end the statement for '" + st.stage_name() +
                              "' (or '.' to chain another primitive), found " + describe(end);
            fail(end, msg);
        }
        int end_line = next().line;
        // A comment on the same line after ';' explains this statement, not the next one.
        if (toks_[pos_].kind == Tok::Comment && toks_[pos_].line == end_line)
            inner_comments_.push_back(toks_[pos_++].text);
        st.comments = inner_comments_;
        inner_comments_.clear();
        return st;
    }

    PrimitiveCall call(const ScheduleStatement &st) {
        const Token &name = expect_ident("a primitive name after '.'");
        if (name.text == "update")
            fail(name, "update(k) must come right after the func name; start a new statement `" + st.func +
                           ".update(k).…;`");
        PrimitiveCall c;
        c.name = name.text;
        c.loc = {file_, name.line, name.col};
        const PrimitiveInfo *p = find_primitive(c.name);
        if (!p) fail(name, check_call_form(c, st.stage));
        expect("(", "after " + c.name);
        if (!is(peek(), ")")) {
            while (true) {
                c.args.push_back(arg(c.name));
                if (is(peek(), ",")) {
                    next();
                    continue;
                }
                if (is(peek(), ")")) break;
                fail(peek(), "expected ',' or ')' in " + c.name + "(…), found " + describe(peek()) +
                                 "; expected " + p->signature);
            }
        }
        next();  // ')'
        if (peek().kind == Tok::Ident && peek().text == "as") {
            next();
            c.as_name = expect_ident("a name for the new Func after 'as'").text;
        }
        std::string form = check_call_form(c, st.stage);
        if (!form.empty()) fail(name, st.stage_name() + "." + c.str() + ": " + form);
        return c;
    }

    ScheduleArg arg(const std::string &prim) {
        const Token &t = peek();
        ScheduleArg a;
        a.loc = {file_, t.line, t.col};
        if (is(t, "-")) {
            next();
            const Token &n = peek();
            if (n.kind != Tok::Int) fail(n, "expected an integer after '-', found " + describe(n));
            a.kind = ScheduleArg::Kind::Int;
            a.value = -next().value;
            return a;
        }
        if (t.kind == Tok::Int) {
            a.kind = ScheduleArg::Kind::Int;
            a.value = next().value;
            return a;
        }
        if (t.kind != Tok::Ident)
            fail(t, "expected an argument of " + prim + " (a name or an integer), found " + describe(t));
        std::string name = next().text;
        if (is(peek(), "::")) {
            next();
            const Token &v = expect_ident("a name after " + name + "::");
            if (name == "TailStrategy") a.kind = ScheduleArg::Kind::Tail;
            else if (name == "MemoryType") a.kind = ScheduleArg::Kind::Memory;
            else if (name != "PrefetchBoundStrategy")
                fail(t, "unknown qualifier '" + name + "::'; valid: TailStrategy::, MemoryType::, "
                        "PrefetchBoundStrategy::");
            a.name = v.text;
            return a;
        }
        // Dotted names inside arguments are RDom dimensions: r.x.
        while (is(peek(), ".")) {
            next();
            name += "." + expect_ident("a name after '.' in '" + name + ".'").text;
        }
        a.name = name;
        return a;
    }
};

}  // namespace

bool is_schedule_header_line(const std::string &comment) {
    return std::regex_search(comment, header_line_regex());
}

Schedule parse_schedule(const std::string &text, const std::string &file) {
    return Parser(lex(text, file), file).run();
}

Schedule read_schedule_file(const std::string &path) {
    std::ifstream in(path);
    user_check(bool(in), "cannot read schedule file '", path, "'");
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_schedule(ss.str(), path);
}

}  // namespace loom
