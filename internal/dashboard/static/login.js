"use strict";
if (new URLSearchParams(location.search).has("failed")) {
  document.getElementById("login-failed").hidden = false;
}
