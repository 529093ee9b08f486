// The interface in English and Chinese. t("key", {name: value}) fills {name} placeholders.
// Static markup names its text with data-i18n (text), data-i18n-label (aria-label and title)
// and data-i18n-placeholder; translate(root) applies the current language to them.

const STRINGS = {
  en: {
    "app.title": "Assistant",
    "lang.label": "Interface language",
    "login.title": "Sign in", "login.username": "Username", "login.password": "Password",
    "login.submit": "Sign in", "login.failed": "Wrong username or password.",
    "login.to_register": "Create an account", "login.to_login": "I have an account",
    "register.title": "Create an account", "register.email": "Email", "register.nickname": "Display name",
    "register.code": "Verification code", "register.submit": "Create account",
    "register.closed": "Registration is not open on this server. Ask its operator.",
    "signout": "Sign out", "menu": "Conversations",
    "nav.label": "Sections", "nav.chat": "Chat", "nav.inbox": "Inbox",
    "conn.open": "Connected", "conn.connecting": "Connecting…", "conn.waiting": "Offline, reconnecting…",
    "conn.closed": "Disconnected",
    "sessions.label": "Conversations", "sessions.new": "New chat", "sessions.search": "Search messages",
    "sessions.search_label": "Search across all messages", "sessions.empty": "No conversations yet.",
    "sessions.results": "{count} results", "sessions.no_results": "Nothing found.", "sessions.clear_search": "Clear search",
    "sessions.untitled": "New chat",
    "chat.rename": "Rename", "chat.rename_prompt": "New title", "chat.delete": "Delete",
    "chat.delete_confirm": "Delete this conversation and its messages?", "chat.export": "Export",
    "chat.export_label": "Export this conversation", "chat.export_json": "JSON", "chat.export_markdown": "Markdown",
    "chat.export_txt": "Text", "chat.placeholder": "Message the assistant…", "chat.input_label": "Message",
    "chat.send": "Send", "chat.attach": "Attach an image", "chat.remove_attachment": "Remove attachment",
    "chat.uploading": "Uploading…", "chat.upload_failed": "Upload failed: {error}",
    "chat.queued": "Queued (position {position})", "chat.thinking": "Thinking", "chat.thinking_done": "Thought process",
    "chat.older": "Load earlier messages", "chat.empty": "Say hello to start the conversation.",
    "chat.you": "You", "chat.assistant": "Assistant", "chat.from_other_device": "from {device}",
    "chat.error": "Error: {error}", "chat.retry": "Retry", "chat.stopped": "The reply stopped early.",
    "chat.not_allowed": "This account may not use the chat channel.",
    "chat.talk": "Hold to talk", "chat.speak": "Read replies aloud", "chat.listening": "Listening…",
    "chat.no_speech": "No speech was recognised.", "chat.mic_denied": "The microphone is not available: {error}",
    "code.copy": "Copy", "code.copied": "Copied", "code.selected": "Selected — press Ctrl+C",
    "code.plain": "text", "code.copy_label": "Copy the {language} code",
    "tool.started": "started", "tool.running": "running", "tool.completed": "done", "tool.failed": "failed",
    "nav.reminders": "Reminders", "nav.memories": "Memories", "nav.knowledge": "Knowledge", "nav.devices": "Devices",
    "rem.filter": "Show", "rem.status_pending": "Pending", "rem.status_completed": "Completed",
    "rem.status_cancelled": "Cancelled", "rem.status_all": "All", "rem.title": "What to remind you of",
    "rem.when": "When", "rem.repeat": "Repeat", "rem.repeat_none": "Once", "rem.repeat_daily": "Daily",
    "rem.repeat_weekly": "Weekly", "rem.repeat_monthly": "Monthly", "rem.add": "Add", "rem.empty": "No reminders.",
    "rem.complete": "Done", "rem.snooze": "Snooze {minutes} min",
    "mem.search": "Search memories", "mem.new": "Something to remember", "mem.empty": "Nothing remembered yet.",
    "kb.name": "New knowledge base name", "kb.create": "Create", "kb.empty": "No knowledge bases yet.",
    "kb.docs": "{count} documents", "kb.kind": "Document kind", "kb.kind_text": "Text", "kb.kind_url": "Web page",
    "kb.kind_file": "File", "kb.doc_title": "Document title", "kb.text": "Text of the document", "kb.url": "https://…",
    "kb.search": "Search this knowledge base", "kb.search_button": "Search", "kb.chunks": "{count} chunks",
    "dev.empty": "No devices.",
    "inbox.title": "Notifications", "inbox.empty": "No notifications.", "inbox.read_all": "Mark all read", "inbox.mark_read": "mark as read",
    "toast.close": "Dismiss",
  },
  zh: {
    "app.title": "助手",
    "lang.label": "界面语言",
    "login.title": "登录", "login.username": "用户名", "login.password": "密码",
    "login.submit": "登录", "login.failed": "用户名或密码错误。",
    "login.to_register": "注册新账号", "login.to_login": "已有账号，去登录",
    "register.title": "注册账号", "register.email": "邮箱", "register.nickname": "昵称",
    "register.code": "验证码", "register.submit": "注册",
    "register.closed": "此服务器未开放注册，请联系管理员。",
    "signout": "退出登录", "menu": "对话列表",
    "nav.label": "栏目", "nav.chat": "聊天", "nav.inbox": "通知",
    "conn.open": "已连接", "conn.connecting": "连接中…", "conn.waiting": "离线，正在重连…",
    "conn.closed": "已断开",
    "sessions.label": "对话", "sessions.new": "新对话", "sessions.search": "搜索消息",
    "sessions.search_label": "在所有消息中搜索", "sessions.empty": "还没有对话。",
    "sessions.results": "{count} 条结果", "sessions.no_results": "没有找到。", "sessions.clear_search": "清除搜索",
    "sessions.untitled": "新对话",
    "chat.rename": "重命名", "chat.rename_prompt": "新标题", "chat.delete": "删除",
    "chat.delete_confirm": "删除此对话及其所有消息？", "chat.export": "导出",
    "chat.export_label": "导出此对话", "chat.export_json": "JSON", "chat.export_markdown": "Markdown",
    "chat.export_txt": "纯文本", "chat.placeholder": "给助手发消息…", "chat.input_label": "消息",
    "chat.send": "发送", "chat.attach": "添加图片", "chat.remove_attachment": "移除附件",
    "chat.uploading": "上传中…", "chat.upload_failed": "上传失败：{error}",
    "chat.queued": "排队中（第 {position} 位）", "chat.thinking": "思考中", "chat.thinking_done": "思考过程",
    "chat.older": "加载更早的消息", "chat.empty": "打个招呼，开始对话吧。",
    "chat.you": "我", "chat.assistant": "助手", "chat.from_other_device": "来自 {device}",
    "chat.error": "错误：{error}", "chat.retry": "重试", "chat.stopped": "回复提前结束了。",
    "chat.not_allowed": "此账号不能使用聊天通道。",
    "chat.talk": "按住说话", "chat.speak": "朗读回复", "chat.listening": "正在听…",
    "chat.no_speech": "没有识别到语音。", "chat.mic_denied": "无法使用麦克风：{error}",
    "code.copy": "复制", "code.copied": "已复制", "code.selected": "已选中，请按 Ctrl+C",
    "code.plain": "文本", "code.copy_label": "复制 {language} 代码",
    "tool.started": "已开始", "tool.running": "进行中", "tool.completed": "完成", "tool.failed": "失败",
    "nav.reminders": "提醒", "nav.memories": "记忆", "nav.knowledge": "知识库", "nav.devices": "设备",
    "rem.filter": "显示", "rem.status_pending": "待办", "rem.status_completed": "已完成",
    "rem.status_cancelled": "已取消", "rem.status_all": "全部", "rem.title": "提醒内容",
    "rem.when": "时间", "rem.repeat": "重复", "rem.repeat_none": "一次", "rem.repeat_daily": "每天",
    "rem.repeat_weekly": "每周", "rem.repeat_monthly": "每月", "rem.add": "添加", "rem.empty": "没有提醒。",
    "rem.complete": "完成", "rem.snooze": "{minutes} 分钟后再提醒",
    "mem.search": "搜索记忆", "mem.new": "要记住的事", "mem.empty": "还没有记忆。",
    "kb.name": "新知识库名称", "kb.create": "创建", "kb.empty": "还没有知识库。",
    "kb.docs": "{count} 篇文档", "kb.kind": "文档类型", "kb.kind_text": "文本", "kb.kind_url": "网页",
    "kb.kind_file": "文件", "kb.doc_title": "文档标题", "kb.text": "文档内容", "kb.url": "https://…",
    "kb.search": "在此知识库中搜索", "kb.search_button": "搜索", "kb.chunks": "{count} 个片段",
    "dev.empty": "没有设备。",
    "inbox.title": "通知", "inbox.empty": "没有通知。", "inbox.read_all": "全部标为已读", "inbox.mark_read": "标为已读",
    "toast.close": "关闭",
  },
};

export const LANGUAGES = [{code: "en", name: "English"}, {code: "zh", name: "中文"}];
const listeners = new Set();

function initialLanguage() {
  const saved = localStorage.getItem("assistant.language");
  if (saved && STRINGS[saved]) return saved;
  return (navigator.language || "en").toLowerCase().startsWith("zh") ? "zh" : "en";
}

let current = initialLanguage();

export function language() { return current; }

export function t(key, params = {}) {
  const text = STRINGS[current][key] ?? STRINGS.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (whole, name) => (name in params ? String(params[name]) : whole));
}

export function setLanguage(code) {
  if (!STRINGS[code] || code === current) return;
  current = code;
  localStorage.setItem("assistant.language", code);
  translate(document);
  for (const listener of listeners) listener(code);
}

export function onLanguage(listener) { listeners.add(listener); return () => listeners.delete(listener); }

export function translate(root) {
  document.documentElement.lang = current === "zh" ? "zh-CN" : "en";
  for (const element of root.querySelectorAll("[data-i18n]")) element.textContent = t(element.dataset.i18n);
  for (const element of root.querySelectorAll("[data-i18n-label]")) {
    element.setAttribute("aria-label", t(element.dataset.i18nLabel));
    element.setAttribute("title", t(element.dataset.i18nLabel));
  }
  for (const element of root.querySelectorAll("[data-i18n-placeholder]")) {
    element.setAttribute("placeholder", t(element.dataset.i18nPlaceholder));
  }
}
