"""Documents from uploaded files and from web pages fetched under the egress policy."""
import io

import aiohttp
import psutil

from plugins.knowledge import extraction

from . import samples


async def upload(knowledge, content: bytes, filename: str, content_type: str, who: str = "alice") -> dict:
    form = aiohttp.FormData()
    form.add_field("file", io.BytesIO(content), filename=filename, content_type=content_type)
    return await knowledge.call("POST", "/files/upload", who, 201, data=form)


async def add(knowledge, kb_id: str, status: int = 201, who: str = "alice", **body) -> dict:
    return await knowledge.call("POST", f"/knowledge/bases/{kb_id}/documents", who, status, json=body)


async def test_pdf_docx_markdown_and_text_files(knowledge):
    kb_id = (await knowledge.base())["id"]
    pdf = await upload(knowledge, samples.pdf_bytes(), "brief.pdf", "application/pdf")
    document = await add(knowledge, kb_id, title="Mission brief", source_type="file", file_id=pdf["id"])
    assert document["source_type"] == "file" and document["source_ref"] == pdf["id"]
    assert document["content_type"] == "application/pdf" and document["index_status"] == "ready"
    assert samples.PDF_ENGLISH in document["raw_content"] and samples.PDF_CHINESE in document["raw_content"]

    word = await upload(knowledge, samples.docx_bytes(), "rules.docx", extraction.DOCX)
    document = await add(knowledge, kb_id, title="House rules", source_type="file", file_id=word["id"])
    assert document["content_type"] == extraction.DOCX
    chunks = (await knowledge.call("GET", f"/knowledge/documents/{document['id']}"))["chunks"]
    # Its sections are small: they share one chunk under the heading they have in common.
    assert [chunk["heading_path"] for chunk in chunks] == [["Kitchen"]] and "## Weekend" in chunks[0]["text"]

    markdown = await upload(knowledge, b"# Plants\n\nWater the fern on Sundays.", "plants.md", "text/markdown")
    document = await add(knowledge, kb_id, title="Plants", source_type="file", file_id=markdown["id"])
    assert document["content_type"] == "text/markdown"
    chunks = (await knowledge.call("GET", f"/knowledge/documents/{document['id']}"))["chunks"]
    assert chunks[0]["heading_path"] == ["Plants"]

    text = await upload(knowledge, b'{"wifi": "the password is on the fridge"}', "wifi.json", "application/json")
    document = await add(knowledge, kb_id, title="Wifi", source_type="file", file_id=text["id"])
    assert document["raw_content"] == '{"wifi": "the password is on the fridge"}'

    found = await knowledge.search("launch window date of the probe", limit=1)
    assert found["chunks"][0]["document_title"] == "Mission brief"
    assert found["chunks"][0]["source_type"] == "file" and found["chunks"][0]["source_ref"] == pdf["id"]


async def test_files_that_cannot_be_documents(knowledge):
    kb_id = (await knowledge.base())["id"]
    image = await upload(knowledge, samples.PNG, "photo.png", "image/png")
    body = await knowledge.error("POST", f"/knowledge/bases/{kb_id}/documents", 400, "unsupported_document_type",
                                 json={"title": "Photo", "source_type": "file", "file_id": image["id"]})
    assert "image/png" in body["error"] and "PDF" in body["hint"]
    broken = await upload(knowledge, b"%PDF-1.4\nnot really a pdf at all", "broken.pdf", "application/pdf")
    await knowledge.error("POST", f"/knowledge/bases/{kb_id}/documents", 400, "unreadable_document",
                          json={"title": "Broken", "source_type": "file", "file_id": broken["id"]})
    # Someone else's file is no file of yours; neither is an id that does not exist.
    bobs = await upload(knowledge, b"Bob's diary", "diary.txt", "text/plain", who="bob")
    for file_id in (bobs["id"], "00000000-0000-0000-0000-000000000000", "nonsense"):
        await knowledge.error("POST", f"/knowledge/bases/{kb_id}/documents", 400, "file_not_found",
                              json={"title": "Diary", "source_type": "file", "file_id": file_id})
    assert (await knowledge.call("GET", f"/knowledge/bases/{kb_id}/documents"))["total"] == 0


async def test_web_pages_main_text_and_other_types(make_knowledge_app, web_server):
    allowed = f"127.0.0.1:{web_server.port}"
    knowledge = await make_knowledge_app(overrides={"fetch.allow_hosts": [allowed]})
    kb_id = (await knowledge.base())["id"]
    site = f"http://{allowed}"

    page = await add(knowledge, kb_id, title="Lighthouse", source_type="url", url=f"{site}/moved")
    assert page["source_type"] == "url" and page["source_ref"] == f"{site}/article.html"  # after the redirect
    assert page["content_type"] == "text/html"
    assert "two hundred and twelve steps" in page["raw_content"]
    assert "cookies" not in page["raw_content"] and "All rights reserved" not in page["raw_content"]
    chunks = (await knowledge.call("GET", f"/knowledge/documents/{page['id']}"))["chunks"]
    assert [chunk["heading_path"] for chunk in chunks] == [["Lighthouse keeping"]]
    assert "# Lighthouse keeping" in chunks[0]["text"] and "## Supplies" in chunks[0]["text"]

    # The address may come in `content` too (the spec's only text field).
    notes = await add(knowledge, kb_id, title="Key", source_type="url", content=f"{site}/notes.txt")
    assert notes["content_type"] == "text/plain" and "blue flowerpot" in notes["raw_content"]
    report = await add(knowledge, kb_id, title="Report", source_type="url", url=f"{site}/report.pdf")
    assert report["content_type"] == "application/pdf" and samples.PDF_ENGLISH in report["raw_content"]

    await knowledge.error("POST", f"/knowledge/bases/{kb_id}/documents", 400, "unsupported_document_type",
                          json={"title": "Photo", "source_type": "url", "url": f"{site}/photo.png"})
    body = await knowledge.error("POST", f"/knowledge/bases/{kb_id}/documents", 400, "url_fetch_failed",
                                 json={"title": "Gone", "source_type": "url", "url": f"{site}/missing"})
    assert "404" in body["error"]

    found = await knowledge.search("how often does the boat bring food to the keeper", limit=1)
    assert found["chunks"][0]["document_title"] == "Lighthouse"
    assert found["chunks"][0]["source_ref"] == f"{site}/article.html"


async def test_refused_addresses_say_why(make_knowledge_app, web_server):
    allowed = f"127.0.0.1:{web_server.port}"
    knowledge = await make_knowledge_app(overrides={"fetch.allow_hosts": [allowed]})
    kb_id = (await knowledge.base())["id"]
    path = f"/knowledge/bases/{kb_id}/documents"
    cases = {
        f"http://{allowed}/to-metadata": "link-local or cloud metadata",
        f"http://{allowed}/to-loopback": "loopback or private",
        "http://127.0.0.1:1/": "loopback or private",
        "http://10.1.2.3/intranet": "loopback or private",
        "ftp://example.com/file.txt": "only http and https",
        "http://user:secret@example.com/": "credentials",
        "http://[::1/": "malformed",  # urlsplit raised ValueError: a 500
    }
    for url, reason in cases.items():
        body = await knowledge.error("POST", path, 400, "url_refused",
                                     json={"title": "t", "source_type": "url", "url": url})
        assert reason in body["error"], body
    assert (await knowledge.call("GET", path))["total"] == 0


async def test_loopback_is_refused_by_default(knowledge, web_server):
    kb_id = (await knowledge.base())["id"]
    body = await knowledge.error("POST", f"/knowledge/bases/{kb_id}/documents", 400, "url_refused",
                                 json={"title": "t", "source_type": "url",
                                       "url": f"http://127.0.0.1:{web_server.port}/article.html"})
    assert "allow_hosts" in body["error"] + body["hint"]


async def test_pages_above_the_size_limit_are_refused(make_knowledge_app, web_server):
    allowed = f"127.0.0.1:{web_server.port}"
    knowledge = await make_knowledge_app({"url_max_bytes": 1024}, overrides={"fetch.allow_hosts": [allowed]})
    kb_id = (await knowledge.base())["id"]
    await knowledge.error("POST", f"/knowledge/bases/{kb_id}/documents", 400, "document_too_large",
                          json={"title": "t", "source_type": "url", "url": f"http://{allowed}/report.pdf"})


async def test_a_question_only_the_pdf_answers_names_the_pdf(make_knowledge_app, web_server):
    """The issue's scenario up to the search the assistant makes: a new user's base holds a note,
    a PDF and a web page; questions answered only in the PDF find it, in English and Chinese."""
    allowed = f"127.0.0.1:{web_server.port}"
    knowledge = await make_knowledge_app(overrides={"fetch.allow_hosts": [allowed]})
    kb_id = (await knowledge.base("Everything", who="bob"))["id"]
    await add(knowledge, kb_id, who="bob", title="Shopping", content="Buy oat milk, lemons and a new kettle.")
    pdf = await upload(knowledge, samples.pdf_bytes(), "kestrel.pdf", "application/pdf", who="bob")
    brief = await add(knowledge, kb_id, who="bob", title="Kestrel brief", source_type="file", file_id=pdf["id"])
    await add(knowledge, kb_id, who="bob", title="Lighthouse", source_type="url", url=f"http://{allowed}/article.html")
    for question, sentence in (("When can the Kestrel probe be launched?", samples.PDF_ENGLISH),
                               ("探测器的备用电池能用多久？", samples.PDF_CHINESE)):
        top = (await knowledge.search(question, who="bob", limit=3))["chunks"][0]
        assert top["document_id"] == brief["id"] and top["document_title"] == "Kestrel brief", (question, top)
        assert sentence in top["text"] and top["kb_name"] == "Everything"


async def test_a_word_file_that_inflates_a_thousandfold_is_refused_without_costing_the_service(
        make_knowledge_app, web_server):
    """The issue's DOCX (a few hundred kilobytes whose document.xml inflates to 64 MB), uploaded
    and from a web address: a clear 400, and the service's own memory does not grow with it."""
    allowed = f"127.0.0.1:{web_server.port}"
    knowledge = await make_knowledge_app(overrides={"fetch.allow_hosts": [allowed]})
    kb_id = (await knowledge.base())["id"]
    bomb = await upload(knowledge, samples.docx_bomb(), "bomb.docx", extraction.DOCX)
    service = psutil.Process()
    before = service.memory_info().rss
    body = await knowledge.error("POST", f"/knowledge/bases/{kb_id}/documents", 400, "document_too_complex",
                                 json={"title": "Bomb", "source_type": "file", "file_id": bomb["id"]})
    assert "word/document.xml" in body["error"] and "unpacks to more than" in body["error"]
    await knowledge.error("POST", f"/knowledge/bases/{kb_id}/documents", 400, "document_too_complex",
                          json={"title": "Bomb", "source_type": "url", "url": f"http://{allowed}/bomb.docx"})
    assert service.memory_info().rss - before < 100 * 1024 * 1024
    assert (await knowledge.call("GET", f"/knowledge/bases/{kb_id}/documents"))["total"] == 0


async def test_a_reader_over_its_cpu_time_or_memory_is_a_clear_400_and_the_next_document_reads(
        make_knowledge_app):
    """What the extraction's own bounds let through meets the child process's limits: a PDF whose
    content (four 2 MB streams, within the 16 MiB allowed) takes longer to parse than one CPU
    second; a Word file (its ratio allowed) that takes more memory than 32 MiB. Each is a 400,
    and the next document is read as usual."""
    knowledge = await make_knowledge_app({"extract_cpu_seconds": 1, "extract_memory_bytes": 32 * 1024 * 1024,
                                          "extract_max_ratio": 100_000})
    kb_id = (await knowledge.base())["id"]
    slow = await upload(knowledge, samples.shared_stream_pdf(pages=4, filler_bytes=2_000_000, shared=False),
                        "slow.pdf", "application/pdf")
    body = await knowledge.error("POST", f"/knowledge/bases/{kb_id}/documents", 400, "document_too_complex",
                                 json={"title": "Slow", "source_type": "file", "file_id": slow["id"]})
    assert "CPU" in body["error"]
    big = await upload(knowledge, samples.docx_bomb(16 * 1024 * 1024), "big.docx", extraction.DOCX)
    body = await knowledge.error("POST", f"/knowledge/bases/{kb_id}/documents", 400, "document_too_complex",
                                 json={"title": "Big", "source_type": "file", "file_id": big["id"]})
    assert "memory" in body["error"]
    pdf = await upload(knowledge, samples.pdf_bytes(), "brief.pdf", "application/pdf")
    document = await add(knowledge, kb_id, title="Mission brief", source_type="file", file_id=pdf["id"])
    assert samples.PDF_ENGLISH in document["raw_content"]
