mod leader;
