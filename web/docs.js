// The API page: Swagger UI from local files (no CDN), started from this file rather than an
// inline script, so the Content-Security-Policy needs no 'unsafe-inline' for scripts. The
// bundled Swagger UI (4.15) reads OpenAPI 3.0, so it is given the 3.0 form of the document.
"use strict";
window.addEventListener("DOMContentLoaded", () => {
  window.ui = SwaggerUIBundle({
    url: "/docs/openapi-3.0.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
});
