"""Sentence ends beyond English and CJK (issue 21, item 4), on short real sentences in each script.

The rule is ``packer.SENTENCE`` (its comment lists the marks and the Thai/Lao fallback); the findings
call a chunk edge clean at the same places, so a chunk cut at these ends carries no mid-sentence finding.
"""

from __future__ import annotations

import pytest

from chunkyard.chunking.api import split_document
from chunkyard.chunking.packer import SENTENCE

from support.checks import run_and_check

# Each case: the sentences of one short text, in order (the text is them joined by one space).
SCRIPTS = {
    "hindi (danda, double danda)": ["यह एक छोटा वाक्य है।", "यह दूसरा वाक्य है॥", "तीसरा वाक्य यहाँ है।"],
    "marathi": ["मी पुस्तक वाचतो।", "तो शाळेत जातो।", "आज पाऊस पडला।"],
    "arabic (question mark, full stop)": [
        "هل تتكلم العربية؟",
        "نعم، أتكلم قليلا.",
        "أين المكتبة؟",
        "إنها هناك.",
    ],
    "urdu (full stop)": ["یہ ایک کتاب ہے۔", "وہ میرا دوست ہے۔", "ہم کل بازار جائیں گے۔"],
    "armenian (full stop)": ["Ես սիրում եմ գրքեր։", "Նա ապրում է Երևանում։", "Այսօր եղանակը լավ է։"],
    "amharic (full stop, question mark)": ["ሰላም ነው።", "እንዴት ነህ፧", "ደህና ነኝ።"],
    "thai (space between phrases)": ["ฉันชอบกินข้าว", "วันนี้อากาศดีมาก", "เราไปเที่ยวกันเถอะ"],
    "lao (space between phrases)": ["ຂ້ອຍມັກກິນເຂົ້າ", "ມື້ນີ້ອາກາດດີ", "ພວກເຮົາໄປທ່ຽວກັນ"],
    "khmer (khan)": ["ខ្ញុំចូលចិត្តអានសៀវភៅ។", "គាត់រស់នៅភ្នំពេញ។", "ថ្ងៃនេះមេឃស្រឡះ។"],
}


@pytest.mark.parametrize("sentences", SCRIPTS.values(), ids=SCRIPTS.keys())
def test_the_sentence_level_finds_each_end(sentences: list[str]) -> None:
    text = " ".join(sentences)
    ends = [m.end() for m in SENTENCE.pattern.finditer(text) if m.end() < len(text)]
    starts = [0, *ends]
    assert [text[a:b].strip() for a, b in zip(starts, [*ends, len(text)], strict=True)] == sentences


@pytest.mark.parametrize("strategy", ["sentence", "recursive", "markdown"])
@pytest.mark.parametrize("sentences", SCRIPTS.values(), ids=SCRIPTS.keys())
def test_chunks_end_at_sentence_ends_without_findings(strategy: str, sentences: list[str]) -> None:
    text = " ".join(sentences)
    budget = max(len(s) for s in sentences) + 2  # one sentence fits, two do not
    config = {"strategy": strategy, "unit": "chars", "max_size": budget}
    chunks = run_and_check(text, config).chunks
    assert [c.text for c in chunks] == sentences
    assert all(not c.findings for c in chunks), [c.findings for c in chunks]


def test_thai_without_spaces_falls_back_to_graphemes() -> None:
    """No spaces and no marks: no sentence end exists; the chunks are cut between graphemes."""
    text = "ฉันชอบกินข้าววันนี้อากาศดีมากเราไปเที่ยวกันเถอะ"
    assert not any(m.end() < len(text) for m in SENTENCE.pattern.finditer(text))
    chunks = run_and_check(text, {"strategy": "sentence", "unit": "chars", "max_size": 20}).chunks
    assert "".join(c.text for c in chunks) == text and len(chunks) >= 3


def test_a_period_inside_latin_text_still_needs_a_capital_after_it() -> None:
    text = "See version 1.2 of the guide. then read on. Next, stop."
    ends = [m.end() for m in SENTENCE.pattern.finditer(text)]
    assert ends == [text.index("Next")]
    assert (
        split_document(text, {"strategy": "sentence", "unit": "chars", "max_size": 50}).chunks[-1].text
        == "Next, stop."
    )
