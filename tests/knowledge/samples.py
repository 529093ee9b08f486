"""Real small documents, written at test time by the libraries that write them in the wild:
a PDF by reportlab (English and Chinese pages), a Word document by python-docx, a web page."""
from __future__ import annotations

import io

from PIL import Image

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
