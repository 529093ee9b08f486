"""Real small documents, written at test time by the libraries that write them in the wild:
a PDF by reportlab (English and Chinese pages), a Word document by python-docx, a web page."""
from __future__ import annotations

import io

from PIL import Image

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

ARTICLE_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Lighthouse keeping | Coastal Life</title></head>
<body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/shop">Shop</a></li><li><a href="/login">Log in</a></li></ul></nav>
<div class="cookie-banner">We use cookies to improve your experience. Accept all cookies?</div>
<main><article>
<h1>Lighthouse keeping</h1>
<p>The keeper of the northern lighthouse climbs two hundred and twelve steps every evening to light
the lamp. The lens was ground in Paris in 1871 and still turns on a bath of mercury.</p>
<h2>Supplies</h2>
<p>A supply boat brings paraffin, flour and letters once a fortnight when the sea allows it.
In winter storms the keeper may wait six weeks for the boat.</p>
</article></main>
<footer><p>Copyright 2024 Coastal Life Media. All rights reserved. Privacy policy. Terms of use.</p></footer>
</body></html>
"""

# Sentences only the PDF holds: the assistant's answer must come from it.
PDF_ENGLISH = "The orbital launch window for the Kestrel probe opens on the ninth of March."
PDF_CHINESE = "第二页：探测器的备用电池可以连续工作四十个小时。"


def pdf_bytes(title: str = "Kestrel mission brief") -> bytes:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=A4)
    pdf.setTitle(title)
    pdf.setFont("Helvetica", 12)
    pdf.drawString(72, 800, PDF_ENGLISH)
    pdf.drawString(72, 780, "Mission control will confirm the date a week before.")
    pdf.showPage()
    pdf.setFont("STSong-Light", 12)
    pdf.drawString(72, 800, PDF_CHINESE)
    pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def docx_bytes(title: str = "House rules") -> bytes:
    import docx

    document = docx.Document()
    document.core_properties.title = title
    document.add_heading("Kitchen", level=1)
    document.add_paragraph("Wash the dishes straight after dinner.")
    document.add_heading("Weekend", level=2)
    document.add_paragraph("周末要打扫厨房和阳台。")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Day", "Chore"
    table.cell(1, 0).text, table.cell(1, 1).text = "Monday", "Bins out"
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), (200, 30, 30)).save(buffer, "PNG")
    return buffer.getvalue()


PNG = _png()


def shared_stream_pdf(pages: int = 15, filler_bytes: int = 2_000_000, shared: bool = True,
                      text: str = "Only this sentence is text on every page.") -> bytes:
    """A PDF of a few kilobytes whose pages draw one content stream: the sentence, then
    `filler_bytes` of line drawing that compress a thousandfold and take seconds to parse. With
    `shared` False each page has a copy of the stream of its own."""
    import zlib

    content = b"BT /F1 12 Tf 72 720 Td (" + text.encode() + b") Tj ET\n"
    line = b"0 0 m 1 1 l S\n"
    packed = zlib.compress(content + line * (filler_bytes // len(line)), 9)
    objects = {1: b"<< /Type /Catalog /Pages 2 0 R >>",
               3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"}
    streams = 1 if shared else pages
    for index in range(streams):
        objects[4 + index] = (b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed
                              + b"\nendstream")
    kids = []
    for index in range(pages):
        number = 4 + streams + index
        kids.append(b"%d 0 R" % number)
        objects[number] = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R "
                           b">> >> /Contents %d 0 R >>" % (4 + (0 if shared else index)))
    objects[2] = b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % pages
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = {}
    for number in sorted(objects):
        offsets[number] = out.tell()
        out.write(b"%d 0 obj\n" % number + objects[number] + b"\nendobj\n")
    xref, size = out.tell(), max(objects) + 1
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % size)
    out.write(b"".join(b"%010d 00000 n \n" % offsets[number] for number in range(1, size)))
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, xref))
    return out.getvalue()


def docx_bomb(unpacked_bytes: int = 64 * 1024 * 1024, declared_bytes: int | None = None) -> bytes:
    """A real Word document whose word/document.xml inflates to `unpacked_bytes` of paragraphs
    from about a thousandth of that. With `declared_bytes` the archive's directory states that
    size instead (a lying header)."""
    import struct
    import zipfile

    source = zipfile.ZipFile(io.BytesIO(docx_bytes()))
    head = (b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:document xmlns:w='
            b'"http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>')
    tail = b"</w:body></w:document>"
    paragraph = b"<w:p><w:r><w:t>x</w:t></w:r></w:p>"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bomb:
        for item in source.infolist():
            if item.filename != "word/document.xml":
                bomb.writestr(item, source.read(item))
        with bomb.open("word/document.xml", "w") as member:
            member.write(head)
            block = paragraph * (1024 * 1024 // len(paragraph))
            written = len(head) + len(tail)
            while written + len(block) <= unpacked_bytes:
                member.write(block)
                written += len(block)
            member.write(tail)
    data = buffer.getvalue()
    if declared_bytes is None:
        return data
    # The central directory's entry for the part: its uncompressed size is at byte 24, its name at 46.
    name = b"word/document.xml"
    entry = data.find(b"PK\x01\x02")
    while data[entry + 46:entry + 46 + len(name)] != name:
        entry = data.find(b"PK\x01\x02", entry + 4)
    return data[:entry + 24] + struct.pack("<I", declared_bytes) + data[entry + 28:]
