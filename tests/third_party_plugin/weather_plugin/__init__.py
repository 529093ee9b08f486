"""A third party's plugin: one route, found through its distribution's entry point."""
from aiohttp import web

from gateway.plugins import Plugin

routes = web.RouteTableDef()


@routes.get("/api/v1/weather-example", name="weather_example")
async def weather(request: web.Request) -> web.Response:
    return web.json_response({"forecast": "sunny", "source": "weather_example"})


class WeatherExample(Plugin):
    description = "Example third-party plugin"

    def setup(self, registrar):
        registrar.routes(routes)


plugin = WeatherExample()
