"""Texts in the encodings Lamina reads besides UTF-8, each long enough to be told apart (a few lines, as files are)."""

from __future__ import annotations

from typing import Final

ENCODED: Final = {
    "gb18030": "这是一个测试文件。上下文引擎决定模型在每一轮看到什么内容，以及压缩之后保留什么。\n"
    "会话日志保存在磁盘上，压缩只缩短发送给模型的视图。𠀀\n",
    "gbk": "你好，世界。这是一个用简体中文写的文件，用来检查编码的识别是否正确。\n"
    "提示词、上下文与压缩：每一轮模型看到的内容都由引擎决定。\n",
    "big5": "這是一個用繁體中文寫的檔案，用來檢查編碼的識別是否正確。\n"
    "上下文引擎決定模型在每一輪看到什麼內容，以及壓縮之後保留什麼。\n",
    "shift_jis": "これは日本語で書かれたファイルです。文字コードの判定が正しいかどうかを確認します。\n"
    "コンテキストエンジンは、各ターンでモデルが何を見るかを決めます。\n",
    "euc_kr": "이것은 한국어로 작성된 파일입니다. 문자 인코딩 감지가 올바른지 확인합니다.\n"
    "컨텍스트 엔진은 각 턴마다 모델이 무엇을 보는지 결정합니다.\n",
    "koi8_r": "Это файл, написанный по-русски. Мы проверяем, правильно ли определяется кодировка текста.\n"
    "Движок контекста решает, что модель видит на каждом ходу, и что остаётся после сжатия.\n",
    "cp1251": "Это файл, написанный по-русски. Мы проверяем, правильно ли определяется кодировка текста.\n"
    "Движок контекста решает, что модель видит на каждом ходу, и что остаётся после сжатия.\n",
    "iso8859_2": "Příliš žluťoučký kůň úpěl ďábelské ódy. Tento soubor je napsán česky a kontrolujeme, zda se "
    "kódování textu určí správně.\nZażółć gęślą jaźń: silnik kontekstu decyduje, co model widzi w każdej turze.\n",
    "cp1252": "Café au lait, naïve façade, don’t panic — Größe über alles.\n"
    "Señor Muñoz: mañana, el café está cerrado.\n",
}
"""Encoding (Python's codec name) → a text written in it."""
