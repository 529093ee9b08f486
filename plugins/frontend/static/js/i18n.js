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
    "nav.settings": "Settings", "settings.title": "Settings", "settings.save": "Save",
    "settings.timezone": "Time zone", "settings.use_device_zone": "Use this device's ({zone})",
    "settings.timezone_intro": "What “tomorrow at 9” means to the assistant, your reminders and your rules.",
    "settings.timezone_saved": "Time zone saved: {zone}", "settings.language": "Language",
    "settings.speak": "Speak the assistant's replies on this device", "settings.devices": "Your devices",
    "settings.sign_out_others": "Sign out of every other device",
    "settings.sign_out_others_intro": "Your other phones and browsers must sign in again; they stop within 15 minutes. This device stays signed in.",
    "settings.sign_out_others_confirm": "Sign out of every other device?",
    "settings.signed_out_others": "Signed out of {count} other logins.",
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
    "chat.stop": "Stop", "chat.stopped_by_you": "Stopped.", "chat.copy": "Copy", "chat.copied": "Copied",
    "chat.copy_failed": "Could not copy: {error}", "chat.edit": "Edit", "chat.edit_label": "Edit your message",
    "chat.cancel": "Cancel", "chat.regenerate": "Regenerate",
    "chat.busy": "A reply is still running: stop it or wait for it to finish.",
    "chat.not_allowed": "This account may not use the chat channel.",
    "chat.talk": "Hold to talk", "chat.speak": "Read replies aloud", "chat.listening": "Listening…",
    "chat.no_speech": "No speech was recognised.", "chat.mic_denied": "The microphone is not available: {error}",
    "code.copy": "Copy", "code.copied": "Copied", "code.selected": "Selected — press Ctrl+C",
    "code.plain": "text", "code.copy_label": "Copy the {language} code",
    "tool.started": "started", "tool.running": "running", "tool.completed": "done", "tool.failed": "failed",
    "inbox.title": "Notifications", "inbox.empty": "No notifications.", "inbox.read_all": "Mark all read", "inbox.mark_read": "mark as read",
    "toast.close": "Dismiss",
    // Feature panes (reminders, devices, memories, knowledge) and voice.
    "nav.reminders": "Reminders", "nav.devices": "Devices", "nav.memories": "Memories", "nav.knowledge": "Knowledge",
    "reminders.title_list": "Reminders", "reminders.new": "New reminder", "reminders.title": "What",
    "reminders.title_placeholder": "Call mom", "reminders.when": "When", "reminders.repeat": "Repeat",
    "reminders.repeat_none": "Once", "reminders.repeat_daily": "Every day", "reminders.repeat_weekdays": "Weekdays",
    "reminders.repeat_weekly": "Every week", "reminders.repeat_monthly": "Every month", "reminders.repeat_cron": "Custom",
    "reminders.add": "Add reminder", "reminders.tab_pending": "Upcoming", "reminders.tab_completed": "Done",
    "reminders.empty": "Nothing upcoming. Add a reminder above, or ask the assistant.", "reminders.empty_done": "Nothing done yet.",
    "reminders.fired": "Due", "reminders.complete": "Done", "reminders.snooze": "Snooze…", "reminders.snooze_10m": "10 minutes",
    "reminders.snooze_1h": "1 hour", "reminders.snooze_tomorrow": "Tomorrow 9:00", "reminders.reopen": "Reopen",
    "reminders.delete": "Delete", "reminders.delete_confirm": "Delete the reminder “{title}”?",
    "reminders.created_toast": "Reminder set: {title}, {when}", "reminders.completed_toast": "Done: {title}",
    "devices.title": "Devices", "devices.refresh": "Refresh", "devices.empty": "No devices.",
    "devices.power": "Power", "devices.on": "On", "devices.off": "Off", "devices.online": "Online", "devices.offline": "Offline",
    "devices.lock": "Lock", "devices.unlock": "Unlock", "devices.locked": "Locked", "devices.unlocked": "Unlocked",
    "devices.position_is": "Open {value}%",
    "devices.prop_brightness": "Brightness", "devices.prop_color_temp": "Colour", "devices.prop_position": "Position",
    "devices.prop_target_temperature": "Target", "devices.prop_mode": "Mode", "devices.prop_fan": "Fan",
    "devices.prop_temperature": "Temperature", "devices.prop_humidity": "Humidity", "devices.prop_value": "Value",
    "devices.option_cool": "Cool", "devices.option_heat": "Heat", "devices.option_fan": "Fan", "devices.option_dry": "Dry",
    "devices.option_auto": "Auto", "devices.option_low": "Low", "devices.option_medium": "Medium", "devices.option_high": "High",
    "memories.title": "Memories", "memories.intro": "What the assistant remembers about you. Delete anything it should forget.",
    "memories.search": "Search memories", "memories.search_button": "Search", "memories.content": "Something to remember",
    "memories.content_placeholder": "I am allergic to peanuts", "memories.category": "Category", "memories.add": "Remember",
    "memories.cat_identity": "Identity", "memories.cat_preference": "Preference", "memories.cat_health": "Health",
    "memories.cat_relationship": "People", "memories.cat_work": "Work", "memories.cat_schedule": "Schedule", "memories.cat_other": "Other",
    "memories.priority": "priority {priority}", "memories.source_explicit": "you said", "memories.source_extracted": "learned",
    "memories.source_api": "added", "memories.previously": "Before: {content}", "memories.delete": "Forget",
    "memories.delete_label": "Forget “{content}”", "memories.delete_confirm": "Forget this memory?", "memories.deleted": "Forgotten.",
    "memories.results": "{count} found for “{query}”", "memories.no_results": "Nothing matches.",
    "memories.empty": "Nothing remembered yet.", "memories.action_created": "Remembered.",
    "memories.action_merged": "Merged with what was known.", "memories.action_superseded": "Replaced what was known.",
    "knowledge.title": "Knowledge", "knowledge.bases": "Knowledge bases", "knowledge.no_bases": "No knowledge base yet.",
    "knowledge.base_name": "Name", "knowledge.base_description": "Description", "knowledge.create": "Create knowledge base",
    "knowledge.choose": "Create a knowledge base, then add documents the assistant can search.",
    "knowledge.delete_base": "Delete base", "knowledge.delete_base_confirm": "Delete “{name}” and all its documents?",
    "knowledge.doc_count": "documents: {count}", "knowledge.documents": "Documents", "knowledge.no_documents": "No documents yet.",
    "knowledge.add_document": "Add document", "knowledge.source": "Source", "knowledge.source_text": "Text",
    "knowledge.source_file": "File", "knowledge.source_url": "Web page", "knowledge.doc_title": "Title",
    "knowledge.content": "Text", "knowledge.file": "File (text, Markdown, PDF, Word)", "knowledge.url": "Address",
    "knowledge.delete": "Delete", "knowledge.delete_document_label": "Delete “{title}”",
    "knowledge.delete_document_confirm": "Delete the document “{title}”?",
    "knowledge.status_pending": "Waiting", "knowledge.status_indexing": "Indexing", "knowledge.status_ready": "Ready",
    "knowledge.status_failed": "Failed", "knowledge.size": "{chars} characters, {chunks} chunks",
    "knowledge.added_ready": "Added and searchable: {title}", "knowledge.added_pending": "Added; indexing {title}…",
    "knowledge.search": "Search this knowledge base", "knowledge.search_button": "Search", "knowledge.no_hits": "Nothing found.",
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
    "nav.settings": "设置", "settings.title": "设置", "settings.save": "保存",
    "settings.timezone": "时区", "settings.use_device_zone": "使用本设备的时区（{zone}）",
    "settings.timezone_intro": "助手、提醒和自动化规则按这个时区理解“明天 9 点”。",
    "settings.timezone_saved": "时区已保存：{zone}", "settings.language": "语言",
    "settings.speak": "在本设备上朗读助手的回复", "settings.devices": "你的设备",
    "settings.sign_out_others": "退出其他所有设备",
    "settings.sign_out_others_intro": "你的其他手机和浏览器需要重新登录；它们会在 15 分钟内失效。本设备保持登录。",
    "settings.sign_out_others_confirm": "退出其他所有设备？",
    "settings.signed_out_others": "已退出其他 {count} 个登录。",
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
    "chat.stop": "停止", "chat.stopped_by_you": "已停止。", "chat.copy": "复制", "chat.copied": "已复制",
    "chat.copy_failed": "无法复制：{error}", "chat.edit": "编辑", "chat.edit_label": "编辑你的消息",
    "chat.cancel": "取消", "chat.regenerate": "重新生成",
    "chat.busy": "回复仍在进行：请先停止它，或等它结束。",
    "chat.not_allowed": "此账号不能使用聊天通道。",
    "chat.talk": "按住说话", "chat.speak": "朗读回复", "chat.listening": "正在听…",
    "chat.no_speech": "没有识别到语音。", "chat.mic_denied": "无法使用麦克风：{error}",
    "code.copy": "复制", "code.copied": "已复制", "code.selected": "已选中，请按 Ctrl+C",
    "code.plain": "文本", "code.copy_label": "复制 {language} 代码",
    "tool.started": "已开始", "tool.running": "进行中", "tool.completed": "完成", "tool.failed": "失败",
    "inbox.title": "通知", "inbox.empty": "没有通知。", "inbox.read_all": "全部标为已读", "inbox.mark_read": "标为已读",
    "toast.close": "关闭",
    // Feature panes (reminders, devices, memories, knowledge) and voice.
    "nav.reminders": "提醒", "nav.devices": "设备", "nav.memories": "记忆", "nav.knowledge": "知识库",
    "reminders.title_list": "提醒", "reminders.new": "新提醒", "reminders.title": "内容",
    "reminders.title_placeholder": "给妈妈打电话", "reminders.when": "时间", "reminders.repeat": "重复",
    "reminders.repeat_none": "仅一次", "reminders.repeat_daily": "每天", "reminders.repeat_weekdays": "工作日",
    "reminders.repeat_weekly": "每周", "reminders.repeat_monthly": "每月", "reminders.repeat_cron": "自定义",
    "reminders.add": "添加提醒", "reminders.tab_pending": "待办", "reminders.tab_completed": "已完成",
    "reminders.empty": "没有待办提醒。在上面添加，或者告诉助手。", "reminders.empty_done": "还没有完成的提醒。",
    "reminders.fired": "已到时间", "reminders.complete": "完成", "reminders.snooze": "稍后提醒…", "reminders.snooze_10m": "10 分钟后",
    "reminders.snooze_1h": "1 小时后", "reminders.snooze_tomorrow": "明天 9:00", "reminders.reopen": "重新打开",
    "reminders.delete": "删除", "reminders.delete_confirm": "删除提醒“{title}”？",
    "reminders.created_toast": "已设置提醒：{title}，{when}", "reminders.completed_toast": "已完成：{title}",
    "devices.title": "设备", "devices.refresh": "刷新", "devices.empty": "没有设备。",
    "devices.power": "电源", "devices.on": "开", "devices.off": "关", "devices.online": "在线", "devices.offline": "离线",
    "devices.lock": "上锁", "devices.unlock": "开锁", "devices.locked": "已上锁", "devices.unlocked": "未上锁",
    "devices.position_is": "打开 {value}%",
    "devices.prop_brightness": "亮度", "devices.prop_color_temp": "色温", "devices.prop_position": "开合",
    "devices.prop_target_temperature": "目标温度", "devices.prop_mode": "模式", "devices.prop_fan": "风速",
    "devices.prop_temperature": "温度", "devices.prop_humidity": "湿度", "devices.prop_value": "数值",
    "devices.option_cool": "制冷", "devices.option_heat": "制热", "devices.option_fan": "送风", "devices.option_dry": "除湿",
    "devices.option_auto": "自动", "devices.option_low": "低", "devices.option_medium": "中", "devices.option_high": "高",
    "memories.title": "记忆", "memories.intro": "助手记住的关于你的事。不想让它记住的，可以删除。",
    "memories.search": "搜索记忆", "memories.search_button": "搜索", "memories.content": "要记住的事",
    "memories.content_placeholder": "我对花生过敏", "memories.category": "类别", "memories.add": "记住",
    "memories.cat_identity": "身份", "memories.cat_preference": "偏好", "memories.cat_health": "健康",
    "memories.cat_relationship": "人际", "memories.cat_work": "工作", "memories.cat_schedule": "日程", "memories.cat_other": "其他",
    "memories.priority": "优先级 {priority}", "memories.source_explicit": "你说的", "memories.source_extracted": "从对话中学到",
    "memories.source_api": "手动添加", "memories.previously": "之前：{content}", "memories.delete": "忘记",
    "memories.delete_label": "忘记“{content}”", "memories.delete_confirm": "忘记这条记忆？", "memories.deleted": "已忘记。",
    "memories.results": "“{query}”找到 {count} 条", "memories.no_results": "没有匹配的记忆。",
    "memories.empty": "还没有记忆。", "memories.action_created": "已记住。",
    "memories.action_merged": "已与已知信息合并。", "memories.action_superseded": "已替换旧的信息。",
    "knowledge.title": "知识库", "knowledge.bases": "知识库", "knowledge.no_bases": "还没有知识库。",
    "knowledge.base_name": "名称", "knowledge.base_description": "描述", "knowledge.create": "新建知识库",
    "knowledge.choose": "新建一个知识库，再添加助手可以检索的文档。",
    "knowledge.delete_base": "删除知识库", "knowledge.delete_base_confirm": "删除“{name}”及其所有文档？",
    "knowledge.doc_count": "{count} 篇文档", "knowledge.documents": "文档", "knowledge.no_documents": "还没有文档。",
    "knowledge.add_document": "添加文档", "knowledge.source": "来源", "knowledge.source_text": "文本",
    "knowledge.source_file": "文件", "knowledge.source_url": "网页", "knowledge.doc_title": "标题",
    "knowledge.content": "文本", "knowledge.file": "文件（文本、Markdown、PDF、Word）", "knowledge.url": "网址",
    "knowledge.delete": "删除", "knowledge.delete_document_label": "删除“{title}”",
    "knowledge.delete_document_confirm": "删除文档“{title}”？",
    "knowledge.status_pending": "等待中", "knowledge.status_indexing": "索引中", "knowledge.status_ready": "就绪",
    "knowledge.status_failed": "失败", "knowledge.size": "{chars} 字符，{chunks} 段",
    "knowledge.added_ready": "已添加，可检索：{title}", "knowledge.added_pending": "已添加，正在索引 {title}…",
    "knowledge.search": "搜索此知识库", "knowledge.search_button": "搜索", "knowledge.no_hits": "没有找到。",
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
