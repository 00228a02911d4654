/* Starts Swagger UI on /docs. A file, not an inline script, so the page runs under the strict
   Content-Security-Policy; no validator badge (it would call an outside service). */
"use strict";
(function () {
  const el = document.getElementById("swagger-ui");
  window.ui = window.SwaggerUIBundle({
    url: el.dataset.openapi,
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    validatorUrl: null,
    presets: [window.SwaggerUIBundle.presets.apis, window.SwaggerUIBundle.SwaggerUIStandalonePreset],
  });
})();
