"""A plugin that adds tools through the `tools` service, exactly as later feature plugins will."""
import re

from gateway.plugins import Plugin
from plugins.ai_core.contract import TOOLS


class LampToolsPlugin(Plugin):
    name = "lamp_tools"
    depends = ("ai_core",)

    def setup(self, registrar):
        tools = registrar.context.contracts.require(TOOLS)

        async def switch_lamp(arguments, call):
            await call.progress(0.5, f"switching the lamp in the {arguments['room']}")
            return {"room": arguments["room"], "on": True}

        def parse(text):
            match = re.search(r"(?:in the|在)\s*(\w+?)(?:的灯|\s|$)", text)
            return {"room": match.group(1)} if match else {}

        def summarize(result, language):
            return (f"{result['room']}的灯已打开。" if language == "zh"
                    else f"The lamp in the {result['room']} is on.")

        tools.add("switch_lamp", "Switch on the lamp in a room",
                  {"type": "object", "properties": {"room": {"type": "string"}}, "required": ["room"]},
                  switch_lamp, owner=self.name, parse_arguments=parse, summarize=summarize,
                  examples={"en": ["turn on the lamp", "switch on the light"], "zh": ["开灯", "打开灯"]},
                  topic={"en": "Lamps", "zh": "台灯"},
                  help={"en": ["turn on the lamp in the kitchen"], "zh": ["打开在厨房的灯"]},
                  progress={"en": ["Switching on the lamp in the {room}…", "Switching on a lamp…"],
                            "zh": ["正在打开{room}的灯…"]})

        async def boil(arguments, call):
            return {"boiling": True}

        async def unplugged(call):  # the kettle's service is not there: help does not offer it
            return False

        tools.add("boil_kettle", "Boil the kettle", {"type": "object", "properties": {}}, boil, owner=self.name,
                  topic={"en": "Kettle", "zh": "水壶"}, help={"en": ["boil the kettle"], "zh": ["烧水"]},
                  available=unplugged)

        async def overheat(arguments, call):
            raise RuntimeError("the heater is on fire")

        tools.add("overheat", "A tool that always fails", {"type": "object", "properties": {}},
                  overheat, owner=self.name, examples={"en": ["heat the house"]})
