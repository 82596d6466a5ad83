"""``python -m tiedlm_lib.paper``: execute the notebooks and render the HTML paper (``tiedlm_lib.paper.build``)."""

import sys

from tiedlm_lib.paper.build import main

sys.exit(main())
