//! The built-in intent rules, as data: English and Chinese terms per capability id (`math`,
//! `hash`, `text`, …), the neutral Chinese terms that keep a capability term from matching inside
//! a longer word, and the connectives that split a request into steps. Matching is the parent's.

use super::IntentRule;

/// Chinese words that contain a capability term but mean something else.
pub const DEFAULT_NEUTRAL_TERMS: &[&str] = &[
    "计算机", // computer (contains 计算, compute)
    "加密",   // encrypt (not a hash)
    "地址",   // address
    "线程",   // thread
    "读者",   // reader (a person)
    "文件夹", // folder: kept whole so 文件 matches on its own only
];

/// The built-in rules as data: a capability id and the terms that ask for it.
pub const DEFAULT_RULES: &[(&str, &[&str])] = &[
    (
        "math",
        &[
            "calculate",
            "calculator",
            "compute",
            "evaluate",
            "add",
            "sum",
            "plus",
            "minus",
            "subtract",
            "multiply",
            "divide",
            "times",
            "sqrt",
            "square root",
            "factorial",
            "average",
            "mean",
            "median",
            "计算",
            "算一下",
            "求和",
            "相加",
            "加上",
            "减去",
            "乘以",
            "除以",
            "平均值",
            "阶乘",
            "平方根",
        ],
    ),
    (
        "hash",
        &[
            "hash",
            "sha256",
            "sha1",
            "sha512",
            "md5",
            "blake3",
            "hmac",
            "digest",
            "checksum",
            "哈希",
            "散列",
            "摘要",
            "校验和",
        ],
    ),
    (
        "text",
        &[
            "uppercase",
            "lowercase",
            "reverse",
            "trim",
            "substring",
            "string length",
            "大写",
            "小写",
            "反转",
            "字符串",
        ],
    ),
    (
        "id",
        &[
            "uuid",
            "ulid",
            "nanoid",
            "generate id",
            "unique id",
            "唯一标识",
            "生成编号",
        ],
    ),
    (
        "regex",
        &[
            "regex",
            "regexp",
            "regular expression",
            "正则",
            "正则表达式",
        ],
    ),
    ("json", &["json", "jq", "json pointer"]),
    (
        "web_search",
        &["search", "look up", "web search", "搜索", "检索", "查找"],
    ),
    (
        "web_fetch",
        &[
            "fetch", "download", "url", "webpage", "web page", "网页", "抓取", "下载",
        ],
    ),
    (
        "file",
        &[
            "file",
            "files",
            "read",
            "write",
            "directory",
            "folder",
            "mkdir",
            "文件",
            "读取",
            "写入",
            "目录",
        ],
    ),
    ("pdf", &["pdf", "pdf text"]),
];

/// [`DEFAULT_RULES`] as [`IntentRule`]s.
pub(super) fn default_rules() -> Vec<IntentRule> {
    DEFAULT_RULES
        .iter()
        .map(|(capability, terms)| IntentRule::new(*capability, terms.iter().copied()))
        .collect()
}

/// The connectives that split a request into ordered parts, and whether each one hands the
/// previous part's result on by itself (`using the result`). Longer forms come first so that
/// `and then` wins over `then`.
pub const DEFAULT_CONNECTIVES: &[(&str, bool)] = &[
    ("and after that", false),
    ("and then", false),
    ("after that", false),
    ("afterwards", false),
    ("then", false),
    ("using the result", true),
    ("with the result", true),
    ("use the result", true),
    ("然后再", false),
    ("然后", false),
    ("接着", false),
    ("之后", false),
    ("随后", false),
    ("并且", false),
    ("再", false),
];

/// Words (English, whole words) and terms (Chinese) by which a part refers to the result of
/// the part before it.
pub const REFERENCE_TERMS: &[&str] = &[
    "result",
    "output",
    "answer",
    "it",
    "that",
    "结果",
    "它",
    "上一步",
    "上面",
];
