// A deterministic multilingual corpus for the tokenizer parity test: hand-written samples of many
// scripts, code, emoji, numbers, contractions, whitespace, special tokens, non-NFC text and
// invalid UTF-8, plus random mixtures of them and of code points drawn from script blocks.
#include "parity_corpus.h"

#include <cstdint>
#include <string>
#include <vector>

#include "tlaloc/tokenizer/utf8.h"

namespace tlaloc::testing {

namespace {

// splitmix64: small, fast and identical on every platform (unlike std:: distributions).
struct Rng {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }
  bool Chance(int percent) { return Below(100) < static_cast<size_t>(percent); }
};

const std::vector<std::string>& Samples() {
  static const std::vector<std::string> samples = {
      // Latin with accents
      "Le cœur a ses raisons que la raison ne connaît point.",
      "Über den Wolken muß die Freiheit wohl grenzenlos sein. Größe, Straße, Äpfel.",
      "¿Dónde está la biblioteca? ¡Olé! El niño comió piñata en año nuevo.",
      "Tiếng Việt có dấu: Hà Nội, Đà Nẵng, phở bò, cảm ơn rất nhiều.",
      "Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy.",
      "São Paulo, Açores, coração, não é? Ångström, Øresund, æble, fjörður.",
      // Cyrillic, Greek
      "Съешь же ещё этих мягких французских булок, да выпей чаю.",
      "Україна: Київ, Львів, Харків — ґанок, їжак, є.",
      "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Καλημέρα κόσμε!",
      // CJK
      "我能吞下玻璃而不伤身体。人工智能正在改变世界。",
      "いろはにほへと ちりぬるを。東京タワーは３３３メートルです。",
      "다람쥐 헌 쳇바퀴에 타고파. 안녕하세요, 세계!",
      "中文、日本語、한국어が混ざった文：Qwen3は大規模言語モデルです。",
      // Arabic, Hebrew, Hindi, Thai
      "نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر.",
      "דג סקרן שט בים מאוכזב ולפתע מצא חברה.",
      "ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम।",
      "เป็นมนุษย์สุดประเสริฐเลิศคุณค่า กว่าบรรดาฝูงสัตว์เดรัจฉาน",
      // Code
      "#include <vector>\nint main() {\n  std::vector<int> v{1, 2, 3};\n  for (auto& x : v) x *= "
      "2;\n  return v[0];\n}\n",
      "def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - "
      "2)\n\nprint([fib(i) for i in range(10)])\n",
      "const add = (a, b) => a + b;\nexport default function App() { return <div "
      "className=\"x\">{add(1, 2)}</div>; }\n",
      "fn main() {\n    let s: String = \"héllo\".to_uppercase();\n    println!(\"{s:?}\");\n}\n",
      "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
      "SELECT id, name FROM users WHERE age >= 18 AND name LIKE 'A%' ORDER BY id DESC;",
      "<html><head><title>Test &amp; more</title></head><body><p>Hi!</p></body></html>",
      "#!/bin/bash\nfor f in *.txt; do echo \"$f\" | tr 'a-z' 'A-Z' >> out.log; done\n",
      "x = {\"key\": [1, 2.5e-3, null, true], 'a\\'b': \"\\u00e9\"}\r\n",
      // Emoji: ZWJ sequences, skin tones, flags, keycaps
      "👨‍👩‍👧‍👦 family, 👩🏽‍💻 coder, 🏳️‍🌈 flag, "
      "🧑🏿‍🚀 "
      "astronaut",
      "👍🏻👍🏼👍🏽👍🏾👍🏿 ❤️‍🔥 🇯🇵🇺🇸🇧🇷 "
      "1️⃣#️⃣ "
      "😀😃😄😁",
      // Digits and numbers
      "3.14159265358979323846264338327950288419716939937510",
      "Order #123456789 costs $1,234,567.89 (≈ €1.1M) on 2024-02-29T23:59:59Z.",
      "١٢٣٤٥ ٦٧٨٩٠ and ０１２３ and ⅫⅣ and ²³¹ and 10⁻⁹",
      // Contractions in mixed case
      "I'm sure it's fine, you'll see; we'd've known if they're wrong. Don't, WON'T, She'LL, I'M, "
      "It'S",
      "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'Re 'rE 'vE 'Ll 'lL",
      // Whitespace runs, tabs, CRLF, trailing spaces
      "a  b   c    d\t\te\t \tf\r\ng\r\n\r\nh   ",
      "   leading and trailing   \n\n\n   ",
      "\n",
      " ",
      "\t",
      "\r\n",
      "   \t\r\n  \n",
      "line1\u2028line2\u2029line3\u00a0nbsp\u3000ideographic\u2003em",
      // Special tokens inline
      "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
      "text<|endoftext|>more<|im_end|><|im_end|><think>x</think><tool_call>{}</tool_call>",
      "<|im_start|<|im_end|>><|fim_prefix|><|fim_middle|><|fim_suffix|><|vision_pad|>",
      // Combining characters / non-NFC
      "e\xCC\x81 a\xCC\x80 o\xCC\x88 n\xCC\x83 c\xCC\xA7 A\xCC\x8A",
      "\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB\xE1\x84\x80\xE1\x85\xB3\xE1\x86\xAF",  // Hangul jamo
      "Zalgo: Z\xCD\x91\xCD\x97"
      "a\xCC\x80\xCC\x81l\xCC\x83g\xCC\x84o\xCC\x85",
      "\xE2\x84\xAB \xE2\x84\xA6 \xEF\xAC\x81",  // Angstrom, Ohm sign, fi ligature
      // Invalid UTF-8
      "abc\xFF\xFE def",
      "\xC3\x28",
      "\xE2\x82",
      "\xED\xA0\x80\xED\xB0\x80",
      "\xF0\x9F\x98",
      "ok \xC0\xAF \xE0\x80\xAF \xF4\x90\x80\x80 end",
      "\x80\x81\x82 lone continuations",
      "",
  };
  return samples;
}

// Words and fragments for random mixtures.
const std::vector<std::string>& Fragments() {
  static const std::vector<std::string> fragments = {
      "the",
      "The",
      "THE",
      "quick",
      "brown",
      "fox",
      "jumps",
      "over",
      "lazy",
      "dog",
      "Hello",
      "world",
      "tokenizer",
      "byte-level",
      "BPE",
      "Qwen3",
      "don't",
      "It's",
      "we'll",
      "THEY'RE",
      "I'VE",
      "you'd",
      "I'm",
      "naïve",
      "café",
      "résumé",
      "façade",
      "Ελλάδα",
      "Москва",
      "привет",
      "北京",
      "東京",
      "서울",
      "مرحبا",
      "שלום",
      "नमस्ते",
      "สวัสดี",
      "😀",
      "👍🏽",
      "👩‍🔬",
      "🇫🇷",
      "2024",
      "3.5",
      "-42",
      "1e10",
      "0x1F",
      "100000000000000000",
      "std::vector<int>",
      "self.x",
      "a->b",
      "i++",
      "x != y",
      "&&",
      "||",
      "==",
      "=>",
      "/* c */",
      "// c",
      "# c",
      "\"quoted\"",
      "'single'",
      "(paren)",
      "[bracket]",
      "{brace}",
      "<|im_start|>",
      "<|im_end|>",
      "<|endoftext|>",
      "<think>",
      "</think>",
      "...",
      "!!!",
      "???",
      "—",
      "–",
      "…",
      "«»",
      "“smart”",
      "‘quotes’",
      "©®™",
      "§¶",
      "°C",
      "µs",
      "½",
      "∑∫√",
      "≤≥≠",
  };
  return fragments;
}

const std::vector<std::string>& Separators() {
  static const std::vector<std::string> separators = {
      " ",   " ",    " ",  "",   "  ",  "\n",     "\t",     "\r\n",
      "   ", "\n\n", ", ", ". ", " \n", "\u3000", "\u00a0", " \t ",
  };
  return separators;
}

// Script blocks to draw random code points from (all assigned by Unicode 14, the oldest of the
// Unicode versions involved: PCRE2's tables; newer letters would differ for that reason alone).
struct Block {
  char32_t lo, hi;
};
const std::vector<Block>& Blocks() {
  static const std::vector<Block> blocks = {
      {0x20, 0x7E},       {0xC0, 0xFF},       {0x100, 0x17E},     {0x391, 0x3A9},
      {0x3B1, 0x3C9},     {0x410, 0x44F},     {0x5D0, 0x5EA},     {0x621, 0x64A},
      {0x660, 0x669},     {0x905, 0x939},     {0x93E, 0x94D},     {0x966, 0x96F},
      {0xE01, 0xE3A},     {0xE40, 0xE4E},     {0x300, 0x36F},     {0x2010, 0x2027},
      {0x2030, 0x205E},   {0x3001, 0x303F},   {0x3041, 0x3096},   {0x30A1, 0x30FA},
      {0x4E00, 0x9FA5},   {0xAC00, 0xD7A3},   {0xFF01, 0xFF5E},   {0x1F300, 0x1F64F},
      {0x1F680, 0x1F6C5}, {0x1F90D, 0x1F9FF}, {0x1D400, 0x1D454}, {0x2460, 0x24FF},
  };
  return blocks;
}

std::string RandomMixture(Rng& rng) {
  std::string s;
  const size_t parts = 1 + rng.Below(8);
  for (size_t p = 0; p < parts; ++p) {
    switch (rng.Below(6)) {
      case 0:
      case 1:
        s += Fragments()[rng.Below(Fragments().size())];
        break;
      case 2: {
        const Block& b = Blocks()[rng.Below(Blocks().size())];
        const size_t n = 1 + rng.Below(6);
        for (size_t i = 0; i < n; ++i)
          s += utf8::Encode(b.lo + static_cast<char32_t>(rng.Below(b.hi - b.lo + 1)));
        break;
      }
      case 3: {
        const size_t n = 1 + rng.Below(14);  // a number, possibly long
        for (size_t i = 0; i < n; ++i) s += static_cast<char>('0' + rng.Below(10));
        break;
      }
      case 4: {
        const std::string& sample = Samples()[rng.Below(Samples().size())];
        const size_t start = rng.Below(sample.size() + 1);
        s += sample.substr(start, rng.Below(40));  // may cut a character: invalid UTF-8
        break;
      }
      default: {
        static const char* const spaces[] = {" ", "  ", "\t", "\n", "\r\n", "\r", "    ", "\f"};
        const size_t n = 1 + rng.Below(3);
        for (size_t i = 0; i < n; ++i) s += spaces[rng.Below(8)];
      }
    }
    s += Separators()[rng.Below(Separators().size())];
  }
  if (rng.Chance(10))
    s.insert(rng.Below(s.size() + 1), 1, static_cast<char>(0x80 + rng.Below(0x80)));
  if (rng.Chance(10)) s += "\xCC\x81";  // a combining accent composing with what precedes
  return s;
}

}  // namespace

std::vector<std::string> ParityCorpus(size_t random_count) {
  std::vector<std::string> corpus = Samples();
  for (const std::string& f : Fragments()) corpus.push_back(f);
  Rng rng{20261130};
  for (size_t i = 0; i < random_count; ++i) corpus.push_back(RandomMixture(rng));
  return corpus;
}

}  // namespace tlaloc::testing
